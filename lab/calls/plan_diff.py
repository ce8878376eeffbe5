#!/usr/bin/env python3
"""Which shapes two splitkv CLIs plan differently: runs `plan` of both over a grid of decode shapes
and prints each shape whose family, splits or tile line differ. Run it here (no GPU: both plan for
an H200, whose 132 SMs the H100 shares), not on the device, where each `plan` costs ~0.35 s.

    lab/calls/plan_diff.py OLD_CLI NEW_CLI [--formats int4,fp8] [--dims 64,128] [--variants none,window,softcap]
"""
import argparse
import itertools
import re
import subprocess
import sys


def plan(cli, args):
    out = subprocess.run([cli, "plan"] + args.split(), capture_output=True, text=True).stdout
    keep = {}
    for field in ("family", "splits", "tile"):
        m = re.search(rf"^{field}: (.*)$", out, re.M)
        keep[field] = m.group(1).split("--")[0].strip() if m else "?"
    return keep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--formats", default="bf16,fp8,int8,int4,k8v4,int4_kc")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--variants", default="none,window,softcap,sinks")
    ap.add_argument("--batches", default="1,8,16,32,64,128,256")
    ap.add_argument("--q-lens", default="1,4,8")
    ap.add_argument("--lens", default="8192,32768")
    a = ap.parse_args()
    heads = [(32, 8), (28, 4), (64, 8)]
    variant_args = {"none": "", "window": "--window 128,-1", "softcap": "--softcap 30", "sinks": "--window 128,-1 --sinks"}
    changed = total = 0
    for fmt, d, (hq, hkv), lq, b, lk, var in itertools.product(
            a.formats.split(","), a.dims.split(","), heads, a.q_lens.split(","), a.batches.split(","),
            a.lens.split(","), a.variants.split(",")):
        args = (f"-b {b} --lq {lq} --hq {hq} --hkv {hkv} -d {d} --lk {lk} --kv-format {fmt}"
                f"{' --causal' if int(lq) > 1 else ''} {variant_args[var]}").strip()
        old, new = plan(a.old, args), plan(a.new, args)
        total += 1
        if old != new:
            changed += 1
            diff = "; ".join(f"{k}: {old[k]} -> {new[k]}" for k in old if old[k] != new[k])
            print(f"{args} | {diff}")
    print(f"{changed} of {total} shapes plan differently", file=sys.stderr)


if __name__ == "__main__":
    main()
