#!/usr/bin/env python3
"""Times PyTorch FlexAttention (torch.compile'd flex_attention) on the rows of the `variants`
suites (docs/BENCHMARKING.md), the peer that serves the attention variants: the sliding window and
causality as a mask_mod compiled into a BlockMask (blocks outside every window are skipped), the
softcap as a score_mod, and a sink as one extra key whose score the score_mod sets to the head's
sink logit and whose value row is zero (the softmax then has the sink in its denominator and
nothing of it in the output, splitkv's definition).

Timed like `splitkv bench` and bench/peers.py: CUDA-graph replays of back-to-back calls rotating
over input sets of >= 1 GiB (cold L2), median per call. Layout [B, H, L, D]; GQA by enable_gqa.
A row FlexAttention cannot run records us=None and the reason. FP8-cache rows are timed on bf16
K/V (FlexAttention takes one dtype for Q, K and V): the row says so.

    python3 bench/peers_flex.py --suite variants|variants-prefill --json out.json [--filter TEXT]
"""
import argparse
import datetime
import json
import math
import os
import sys
import time
import warnings

import torch

from peers import GIB, cleanup, reason, time_graph

# Rows as the CLI's suites (tools/gpu_decode.cpp variants_suite, tools/gpu_prefill.cpp
# "variants-prefill"); the rows without a variant are SDPA's in bench/peers.py already, but are
# timed here too so each variant row has its FlexAttention baseline from the same run.
# (B, Lk, Hq, Hkv, q_len, D, kv_format, window_left, softcap, sinks, tree)
def decode_rows():
    rows = []
    for b in (1, 8, 64):
        for w in (128, 4096):
            rows.append((b, w, 32, 8, 1, 128, "bf16", -1, 0.0, False, False))
            for lk in (32768, 131072):
                if b == 64 and lk > 32768:
                    continue
                rows.append((b, lk, 32, 8, 1, 128, "bf16", w, 0.0, False, False))
    rows.append((8, 32768, 32, 8, 1, 128, "bf16", -1, 0.0, False, False))
    rows.append((8, 32768, 32, 8, 1, 128, "bf16", -1, 50.0, False, False))
    for fmt in ("bf16", "fp8"):
        for q_len in (1, 4):
            for b in (1, 16, 64, 256):
                rows.append((b, 8192, 64, 8, q_len, 64, fmt, -1, 0.0, False, False))
                rows.append((b, 8192, 64, 8, q_len, 64, fmt, 128, 0.0, True, False))
    for fmt in ("bf16", "fp8"):  # 16 drafts in a binary tree (tools/gpu_decode.cpp)
        rows.append((32, 8192, 32, 8, 16, 128, fmt, -1, 0.0, False, False))
        rows.append((32, 8192, 32, 8, 16, 128, fmt, -1, 0.0, False, True))
    return rows


def binary_tree(lq):
    """[lq, lq] bool: draft i sees itself and its ancestors, draft i hanging under draft (i - 1) // 2."""
    seen = torch.zeros(lq, lq, dtype=torch.bool)
    for i in range(lq):
        j = i
        while True:
            seen[i, j] = True
            if j == 0:
                break
            j = (j - 1) // 2
    return seen


# (B, Hq, Hkv, L, causal, window_left, softcap), D=128 bf16, Lq = Lk = L
PREFILL = [(1, 16, 16, 16384, True, -1, 0.0), (1, 16, 16, 16384, True, 4096, 0.0),
           (1, 16, 16, 16384, True, -1, 50.0), (1, 16, 16, 16384, False, -1, 0.0),
           (1, 16, 16, 16384, False, -1, 50.0), (4, 32, 8, 4096, True, -1, 0.0), (4, 32, 8, 4096, True, 1024, 0.0)]

_compiled = None


def flex():
    global _compiled
    if _compiled is None:
        from torch.nn.attention.flex_attention import flex_attention
        # Every row is its own static shape (and score_mod / mask_mod): one compile each, beyond
        # Dynamo's default of 8 recompiles of a function (past it, rows would fail, not be timed).
        for limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                      "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, 1024)
        _compiled = torch.compile(flex_attention, dynamic=False)
    return _compiled


def mods(lq, lk, causal, window_left, softcap, sinks, tree=None):
    """(mask_mod, score_mod) of a row; keys [0, lk) are the sequence's, key lk (with sinks) the sink;
    tree: [lq, lq] bool on the device, which drafts (the last lq keys) each query sees, in place of
    the causal rule among them."""
    shift = lk - lq  # query i sits at key position shift + i (bottom-right)

    def mask_mod(b, h, q_idx, kv_idx):
        pos = q_idx + shift
        seen = kv_idx < lk
        if tree is not None:
            draft = kv_idx - shift
            seen = seen & ((draft < 0) | tree[q_idx, draft.clamp(0, lq - 1)])
        elif causal:
            seen = seen & (kv_idx <= pos)
        if window_left >= 0:
            seen = seen & (kv_idx >= pos - window_left)
        if sinks is not None:
            seen = seen | (kv_idx == lk)
        return seen

    score_mod = None
    if softcap > 0 or sinks is not None:
        def score_mod(score, b, h, q_idx, kv_idx):
            if softcap > 0:
                score = softcap * torch.tanh(score / softcap)
            if sinks is not None:
                score = torch.where(kv_idx == lk, sinks[h], score)
            return score
    return mask_mod, score_mod


def time_row(b, hq, hkv, lq, lk, d, causal, window_left, softcap, with_sinks, with_tree=False):
    from torch.nn.attention.flex_attention import create_block_mask
    dtype = torch.bfloat16
    keys = lk + (1 if with_sinks else 0)
    set_bytes = 2 * (2 * b * hkv * keys * d + 2 * b * hq * lq * d)
    sets = int(min(64, max(1, math.ceil(GIB / set_bytes))))
    sinks = torch.full((hq,), 0.5, device="cuda", dtype=torch.float32) if with_sinks else None
    data = []
    for i in range(sets):
        g = torch.Generator(device="cuda").manual_seed(i)
        q = torch.randn(b, hq, lq, d, device="cuda", dtype=dtype, generator=g)
        k = torch.randn(b, hkv, keys, d, device="cuda", dtype=dtype, generator=g)
        v = torch.randn(b, hkv, keys, d, device="cuda", dtype=dtype, generator=g)
        if with_sinks:
            v[:, :, lk] = 0  # the sink adds to the denominator only
        data.append((q, k, v))
    tree = binary_tree(lq).cuda() if with_tree else None
    mask_mod, score_mod = mods(lq, lk, causal, window_left, softcap, sinks, tree)
    block_mask = create_block_mask(mask_mod, None, None, lq, keys, device="cuda")
    fn = flex()

    def call(i):
        q, k, v = data[i]
        return fn(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=hq != hkv)

    try:
        us, spread = time_graph(call, len(data))
        return {"us": us, "spread": spread}
    finally:
        del data
        cleanup()


def run(label, case, args):
    entry = {"case": case, "label": label}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            entry["flex"] = time_row(*args)
        except Exception as e:  # a row FlexAttention cannot run is a result, not a crash
            entry["flex"] = {"us": None, "error": reason(e, caught)}
            cleanup()
    print(f"{label}: flex {entry['flex'].get('us')}", flush=True)
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=["variants", "variants-prefill"], required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--filter", default="")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows already in --json and time only the others; a row whose process died "
                             "(an illegal memory access poisons the CUDA context) is recorded as failed")
    parser.add_argument("--max-seconds", type=float, default=0,
                        help="stop starting rows after this long (each shape compiles once); the rest are recorded "
                             "as not timed")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    inflight = args.json + ".inflight"  # the label of the row being timed, while it runs
    if args.resume and os.path.exists(args.json):
        with open(args.json) as f:
            rows = json.load(f)["rows"]
    died = None
    if args.resume and os.path.exists(inflight):
        with open(inflight) as f:
            died = f.read().strip()
    done = {r["label"] for r in rows}

    def save():
        with open(args.json, "w") as f:
            json.dump({"suite": args.suite, "peer": "flex_attention", "date": datetime.date.today().isoformat(),
                       "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                       "torch": torch.__version__, "rows": rows}, f, indent=1)

    def run_or_skip(label, case, call_args):
        if label == died:
            print(f"{label}: flex failed (the process died)", flush=True)
            return {"case": case, "label": label,
                    "flex": {"us": None, "error": "FlexAttention's process died on this row (CUDA error)"}}
        if args.max_seconds and time.perf_counter() - start > args.max_seconds:
            print(f"{label}: not timed (--max-seconds)", flush=True)
            return {"case": case, "label": label, "flex": {"us": None, "error": "not timed: out of the call's time"}}
        with open(inflight, "w") as f:
            f.write(label)
        entry = run(label, case, call_args)
        os.remove(inflight)
        return entry
    if args.suite == "variants":
        # The variant rows first (they are what the suite compares), then their baselines.
        ordered = sorted(decode_rows(), key=lambda r: (r[7] < 0 and r[8] == 0 and not r[9] and not r[10]))
        for b, lk, hq, hkv, q_len, d, fmt, w, cap, sinks, tree in ordered:
            label = (f"decode B={b} Lk={lk} {hq}/{hkv} q_len={q_len} D={d} {fmt} window={w} softcap={cap:g}"
                     f"{' sinks' if sinks else ''}{' tree' if tree else ''}")
            if args.filter not in label or label in done:
                continue
            case = {"B": b, "Hq": hq, "Hkv": hkv, "Lq": q_len, "Lk": lk, "D": d, "dtype": "bf16", "causal": q_len > 1,
                    "page_size": 0, "kv_format": fmt, "window_left": w, "softcap": cap, "sinks": sinks}
            if tree:
                case["tree_mask"] = True
            entry = run_or_skip(label, case, (b, hq, hkv, q_len, lk, d, q_len > 1, w, cap, sinks, tree))
            if fmt != "bf16":
                entry["flex"]["note"] = "bf16 K/V: FlexAttention reads no FP8 cache"
            rows.append(entry)
            save()
    else:
        for b, hq, hkv, length, causal, w, cap in PREFILL:
            label = f"prefill B={b} {hq}/{hkv} L={length} D=128 bf16 causal={causal} window={w} softcap={cap:g}"
            if args.filter not in label or label in done:
                continue
            case = {"B": b, "Hq": hq, "Hkv": hkv, "Lq": length, "Lk": length, "D": 128, "dtype": "bf16",
                    "causal": causal, "page_size": 0, "window_left": w, "softcap": cap, "sinks": False}
            rows.append(run_or_skip(label, case, (b, hq, hkv, length, length, 128, causal, w, cap, False)))
            save()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
