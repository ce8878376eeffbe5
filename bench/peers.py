#!/usr/bin/env python3
"""Times the peers (PyTorch SDPA with the cuDNN and FlashAttention-2 backends) on the suites of
BENCHMARKING.md, the way `splitkv bench` times splitkv: CUDA-graph replays of back-to-back calls
rotating over input sets of >= 1 GiB in total (cold L2), median of the replays, per call.

Layout [B, H, L, D] (what SDPA takes); GQA through enable_gqa=True. A backend that refuses a
shape is recorded as null with the reason.
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DECODE = [(1, 1024, 32, 8), (1, 4096, 32, 8), (1, 16384, 32, 8), (1, 65536, 32, 8), (1, 131072, 32, 8),
          (8, 8192, 32, 8), (8, 32768, 32, 8), (32, 4096, 32, 8), (64, 2048, 32, 8), (128, 1024, 32, 8),
          (1, 32768, 32, 32), (4, 32768, 64, 8)]
PREFILL = [(4, 12, 1024, 64, "fp16", False), (4, 12, 4096, 64, "fp16", False), (4, 12, 8192, 64, "fp16", False),
           (2, 12, 16384, 64, "fp16", False), (16, 16, 1024, 128, "bf16", False), (4, 16, 4096, 128, "bf16", False),
           (1, 16, 16384, 128, "bf16", False), (16, 16, 1024, 128, "bf16", True), (4, 16, 4096, 128, "bf16", True),
           (1, 16, 16384, 128, "bf16", True)]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
GIB = 1 << 30


def time_graph(call, sets, min_calls=32, replays=25):
    """Median microseconds per call over graph replays of `calls` back-to-back calls."""
    calls = sets * max(1, math.ceil(min_calls / sets))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(sets):  # warm up outside the graph (library handles, autotuning)
            call(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(calls):
            call(i % sets)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(2):
        times = []
        for _ in range(replays):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3 / calls)
        rounds.append(statistics.median(times))
    return rounds[1], abs(rounds[0] - rounds[1]) / rounds[1]


def measure(make_inputs, set_bytes, backend, sdpa_kwargs):
    sets = int(min(64, max(1, math.ceil(GIB / set_bytes))))
    data = [make_inputs(i) for i in range(sets)]

    def call(i):
        q, k, v = data[i]
        with sdpa_kernel(BACKENDS[backend]):
            return F.scaled_dot_product_attention(q, k, v, **sdpa_kwargs)

    try:
        us, spread = time_graph(call, sets)
        return {"us": us, "spread": spread}
    except Exception as e:  # a backend refusing a shape is a result, not a crash
        return {"us": None, "error": str(e).splitlines()[0][:200]}
    finally:
        del data
        torch.cuda.empty_cache()


def decode_rows():
    rows = []
    for b, lk, hq, hkv in DECODE:
        d = 128
        set_bytes = 2 * b * lk * hkv * d * 2 + 2 * b * hq * d * 2

        def make(i, b=b, lk=lk, hq=hq, hkv=hkv):
            g = torch.Generator(device="cuda").manual_seed(i)
            mk = lambda *s: torch.randn(*s, device="cuda", dtype=torch.bfloat16, generator=g)
            return mk(b, hq, 1, d), mk(b, hkv, lk, d), mk(b, hkv, lk, d)

        row = {"case": {"B": b, "Hq": hq, "Hkv": hkv, "Lq": 1, "Lk": lk, "D": d, "dtype": "bf16", "causal": False,
                        "page_size": 0}}
        for name in BACKENDS:
            row[name] = measure(make, set_bytes, name, {"enable_gqa": hq != hkv})
        print(f"decode B={b} Lk={lk} {hq}/{hkv}: " + ", ".join(f"{n} {row[n].get('us')}" for n in BACKENDS),
              flush=True)
        rows.append(row)
    return rows


def prefill_rows():
    rows = []
    for b, h, l, d, dtype, causal in PREFILL:
        torch_dtype = torch.float16 if dtype == "fp16" else torch.bfloat16
        set_bytes = 4 * b * h * l * d * 2

        def make(i, b=b, h=h, l=l, d=d, torch_dtype=torch_dtype):
            g = torch.Generator(device="cuda").manual_seed(i)
            mk = lambda: torch.randn(b, h, l, d, device="cuda", dtype=torch_dtype, generator=g)
            return mk(), mk(), mk()

        row = {"case": {"B": b, "Hq": h, "Hkv": h, "Lq": l, "Lk": l, "D": d, "dtype": dtype, "causal": causal,
                        "page_size": 0}}
        for name in BACKENDS:
            row[name] = measure(make, set_bytes, name, {"is_causal": causal})
        print(f"prefill B={b} H={h} L={l} D={d} causal={causal}: " +
              ", ".join(f"{n} {row[n].get('us')}" for n in BACKENDS), flush=True)
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", choices=["decode", "prefill"], required=True)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    rows = decode_rows() if args.suite == "decode" else prefill_rows()
    with open(args.json, "w") as f:
        json.dump({"suite": args.suite, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
