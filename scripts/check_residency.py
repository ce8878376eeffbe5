#!/usr/bin/env python3
"""Checks that the planner never counts on more resident blocks per SM than a compiled decode
kernel's registers hold.

The planner sizes splits and grids by the blocks an SM holds (Plan::blocks_per_sm): what shared
memory allows, lowered where a family's tile says an instance's registers hold fewer
(tiles::TileSummary::variants_register_blocks and its kin). Those register facts come from ptxas,
so a kernel change can silently make them wrong. This script reads every sm_90a decode kernel of a
built `splitkv` CLI with cuobjdump (registers per thread), asks the CLI's planner for a plan that
launches that very instance (its family forced, the variant that selects the version: none, a
window, a softcap, the short-block twin's grid of a short window (its bound version's: a larger
one) or the register-bound twin's of a long one), and fails where the plan counts more blocks
than 65536 registers hold at that count. The stream kernel (PlanTuning::decode_stream) is checked
against its persistent grid's blocks per SM.

    scripts/check_residency.py BUILD/splitkv [--cuobjdump PATH] [--kernels-from FILE ...]

Every kernel taking DecodeParams must parse (a template parameter this script does not know fails
the check rather than dropping the instance from it).

--kernels-from reads the kernels from other binaries or object files (e.g. one build's
instantiation objects), planned by the given CLI's planner.
"""
import argparse
import math
import re
import shutil
import subprocess
import sys

REGISTERS_PER_SM = 65536
REGISTER_GRANULE = 8  # registers per thread are allocated in multiples of 8


def blocks_held(regs, threads):
    """Blocks of `threads` threads at `regs` registers each that an SM's registers hold."""
    return REGISTERS_PER_SM // (math.ceil(regs / REGISTER_GRANULE) * REGISTER_GRANULE * threads)


# KvFormat's values (include/splitkv/types.hpp) as the mangled names spell them, and the CLI's names.
FORMATS = {0: "native", 3: "fp8", 4: "int8", 5: "int4", 6: "k8v4", 7: "int8_kc", 8: "int4_kc", 9: "k8v4_kc"}
DTYPES = {"10bfloat16_t": "bf16", "6half_t": "fp16"}

KERNEL = re.compile(
    r"_ZN7splitkv6detail(?:13decode_kernel|19quant_decode_kernel|32quant_decode_keys_as_rows_kernel)I"
    r"(?P<traits>.*?)ELb(?P<var>[01])ELb(?P<cap>[01])(?:ELi(?P<min>\d+))?(?:ELb(?P<fold>[01]))?E+vNS0_12DecodeParamsE")
# Any kernel taking DecodeParams: each must parse as KERNEL (a new template parameter that the
# pattern does not know would otherwise drop its instances from the check unseen).
ANY_DECODE_KERNEL = re.compile(r"_ZN7splitkv6detail\d+\w*kernelI\w*vNS0_12DecodeParamsE$")
DECODE_TRAITS = re.compile(r"NS0_12DecodeTraitsIN7cutlass(?P<dtype>10bfloat16_t|6half_t)ELi(?P<d>\d+)ELi(?P<m>\d+)"
                           r"(?:ELi(?P<w>\d+))?E")
FULL_WARPS = 4  # decode_mma's and decode_quant's tiles; fewer: the variants instance's short-block twin
# The stream kernel (PlanTuning::decode_stream): one-warp blocks over a persistent grid, planned by
# the 32-row tile's short-window plans whose twin takes several rounds, and by the 16-row tile's
# where decode_mma is named (Plan::persistent_blocks = SMs x blocks).
STREAM = re.compile(r"_ZN7splitkv6detail20decode_stream_kernelI(?P<traits>.*?)ELi(?P<warps>\d+)ELi\d+ELb[01]E+vNS0_12DecodeParamsE")
SMS = 132  # the planner's default device (DeviceInfo::h200)
QUANT_TRAITS = re.compile(r"(?P<rows>NS0_16KeysAsRowsTraitsI)?NS0_17DecodeQuantTraitsIN7cutlass"
                          r"(?P<dtype>10bfloat16_t|6half_t)ELi(?P<d>\d+)ELNS_8KvFormatE(?P<f>\d+)E"
                          r"(?:Li\d+E(?:Li(?P<w>\d+)E)?)?")


def kernels(binary, cuobjdump):
    """(mangled name, registers per thread) of every sm_90a decode kernel in the binary."""
    out = subprocess.run([cuobjdump, "--dump-resource-usage", binary], capture_output=True, text=True, check=True).stdout
    arch, name, found = None, None, []
    for line in out.splitlines():
        m = re.search(r"arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.search(r"Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"REG:(\d+)", line)
        if m and name and arch == "sm_90a" and (KERNEL.search(name) or ANY_DECODE_KERNEL.search(name)):
            found.append((name, int(m.group(1))))
        name = None
    return found


def instance(name):
    """The plan that launches this kernel: (family, CLI arguments, version), or None if unknown."""
    k = KERNEL.search(name)
    if not k:
        return None
    variants, capped, bound = k.group("var") == "1", k.group("cap") == "1", int(k.group("min") or 0)
    t = DECODE_TRAITS.search(k.group("traits"))
    short_twin = 0
    if t:
        dtype, d, rows = DTYPES[t.group("dtype")], int(t.group("d")), int(t.group("m"))
        warps = int(t.group("w") or FULL_WARPS)
        short_twin = warps if warps < FULL_WARPS else 0
        family, fmt = ("decode_mma_m32" if rows == 32 else "decode_mma"), "native"
    else:
        t = QUANT_TRAITS.search(k.group("traits"))
        if not t:
            return None
        dtype, d, fmt = DTYPES[t.group("dtype")], int(t.group("d")), FORMATS.get(int(t.group("f")))
        if fmt is None:
            return None
        rows = 8 if t.group("rows") else 16
        warps = int(t.group("w") or FULL_WARPS)
        short_twin = warps if warps < FULL_WARPS else 0
        family = ("decode_mma_n8" if fmt == "native" else "decode_kc_n8" if fmt.endswith("_kc") else
                  "decode_quant_n8") if rows == 8 else "decode_quant"
    # Packed rows per KV head that the family serves: q_len x 8 (Hq/Hkv 64/8).
    q_len = {8: 1, 16: 2, 32: 4}[rows]
    args = ["--family", family, "--kv-format", fmt, "--dtype", dtype, "-d", str(d), "--hq", "64", "--hkv", "8",
            "--lq", str(q_len)] + (["--causal"] if q_len > 1 else [])
    if short_twin and bound:  # its version bound for more blocks: a grid it runs in one round, not two
        args += ["-b", "96", "--lk", "8192", "--window", "128,-1"]
    elif short_twin:  # the short-block twin: blocks of a 128-key window, a grid it runs in one round
        args += ["-b", "64", "--lk", "8192", "--window", "128,-1"]
    elif bound:  # the register-bound twin: long blocks it runs in one round
        args += ["-b", "16", "--lk", "8192", "--window", "4096,-1"]
    else:
        args += ["-b", "1", "--lk", "4096"]
        if capped:
            args += ["--softcap", "30"]
        elif variants:
            args += ["--window", "128,-1"]
    version = ("bound short twin" if short_twin and bound else "short twin" if short_twin else "twin" if bound else "capped" if capped else "variants" if variants
               else "plain")
    return family, dtype, d, fmt, version, bound, short_twin, args


def stream_check(cli, name, regs):
    """None where the stream kernel's plan holds in the registers, else why not."""
    k = STREAM.search(name)
    t = DECODE_TRAITS.search(k.group("traits"))
    dtype, d = DTYPES[t.group("dtype")], int(t.group("d"))
    # The 32-row tile's kernel: gpt-oss speculative rows (q_len 4 x GQA 8); the 16-row tile's: its
    # single-query rows, where decode_mma is named (by default decode_mma_n8 serves them).
    family, q_len = ("decode_mma_m32", "4") if t.group("m") == "32" else ("decode_mma", "1")
    args = ["--family", family, "--dtype", dtype, "-d", str(d), "--hq", "64", "--hkv", "8", "--lq", q_len,
            "--causal", "-b", "256", "--lk", "8192", "--window", "128,-1", "--sms", str(SMS)]
    out = subprocess.run([cli, "plan"] + args, capture_output=True, text=True).stdout
    m = re.search(r"persistent: (\d+) blocks", out)
    if not m:
        return f"no stream plan: splitkv plan {' '.join(args)}"
    threads = 32 * int(k.group("warps"))
    held = blocks_held(regs, threads)
    counted = math.ceil(int(m.group(1)) / SMS)
    if counted > held:
        return f"the plan counts {counted} blocks per SM, {regs} registers x {threads} threads hold {held}"
    return None


def planned(cli, args):
    """(blocks per SM the plan counts, threads per block, register-bound count, short-block twin's
    warps) from `splitkv plan`."""
    out = subprocess.run([cli, "plan"] + args, capture_output=True, text=True).stdout
    tile = re.search(r"warps=(\d+).*?(\d+) block\(s\)/SM(?:.*register-bound for (\d+))?", out)
    if not tile:
        return None
    warps = int(tile.group(1))
    return int(tile.group(2)), 32 * warps, int(tile.group(3) or 0), warps if "short-block twin" in out else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cli")
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump"))
    parser.add_argument("--kernels-from", nargs="+", default=None, metavar="FILE")
    a = parser.parse_args()
    if not a.cuobjdump:
        print("check_residency: no cuobjdump (scripts/test.sh installs one with pip)", file=sys.stderr)
        return 2
    sources = a.kernels_from or [a.cli]
    found = [k for source in sources for k in kernels(source, a.cuobjdump)]
    if not found:  # a build for other targets only: the register facts are sm_90a's
        print(f"check_residency: no sm_90a decode kernels in {' '.join(sources)}: nothing to check")
        return 0
    bad = 0
    for name, regs in sorted(found):
        if STREAM.search(name):
            why = stream_check(a.cli, name, regs)
            if why:
                print(f"FAIL the stream kernel {name}: {why}")
                bad += 1
            continue
        inst = instance(name)
        if inst is None:
            print(f"check_residency: a decode kernel this script cannot place: {name}", file=sys.stderr)
            bad += 1
            continue
        family, dtype, d, fmt, version, bound, short_twin, args = inst
        plan = planned(a.cli, args)
        what = f"{family} {dtype} D={d} {fmt} {version}"
        if plan is None:
            print(f"check_residency: no plan for {what}: splitkv plan {' '.join(args)}", file=sys.stderr)
            bad += 1
            continue
        counted, threads, twin, planned_short = plan
        held = blocks_held(regs, threads)
        if short_twin and planned_short != short_twin:
            print(f"FAIL {what}: the short blocks' grid did not launch it (plan's short-block twin: {planned_short} warps)")
            bad += 1
        elif short_twin and twin != bound:
            print(f"FAIL {what}: the short blocks' grid did not launch it (plan: register-bound for {twin})")
            bad += 1
        elif bound and twin != bound:
            print(f"FAIL {what}: the twin's grid did not launch it (plan: register-bound for {twin})")
            bad += 1
        elif counted > held:
            print(f"FAIL {what}: the plan counts {counted} blocks per SM, {regs} registers x {threads} threads hold {held}")
            bad += 1
    print(f"check_residency: {len(found)} decode kernels, {bad} where the plan counts more blocks than fit"
          if bad else f"check_residency: {len(found)} decode kernels, every plan within what the registers hold")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
