"""Host overhead of splitkv's Python entry points per decode call, against the binding's raw run call
(the C++ API behind a nanobind call with precomputed descriptors, plan, workspace and stream).

    python python/bench_overhead.py [--out bench/results/python-overhead.json]

Eager: host time per call over bursts of calls short enough never to fill the launch queue (the
GPU work of a burst is waited for between bursts, outside the timing), median of the bursts.
In-graph: the same calls captured into one CUDA graph per variant and replayed; GPU time per call
from CUDA events. Keys: eager_overhead_us (splitkv.decode with out= and workspace= given, minus
the raw call), eager_alloc_overhead_us (splitkv.decode allocating out and workspace),
torch_op_overhead_us (torch.ops.splitkv.decode_out through the dispatcher), compat_overhead_us
(flash_attn_with_kvcache with an int32 cache_seqlens tensor), graph_overhead_us (replayed graph of
splitkv.decode calls minus replayed graph of raw calls, per call).
"""

import argparse
import json
import os
import platform
import statistics
import time

import torch

import splitkv
from splitkv import _splitkv as C
from splitkv import _torch_ops
from splitkv.compat.flash_attn import flash_attn_with_kvcache


def host_us_per_call(fn, calls, bursts):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(bursts):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def graph_us_per_call(make_fn, calls, replays):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn = make_fn()
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn = make_fn()  # the capture stream is current here
        for _ in range(calls):
            fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(5):
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / (replays * calls))
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join("bench", "results", "python-overhead.json"))
    parser.add_argument("--calls", type=int, default=200, help="calls per timed burst (< launch queue depth)")
    parser.add_argument("--bursts", type=int, default=30)
    args = parser.parse_args()

    dev = torch.cuda.current_device()
    dtype = torch.bfloat16 if C.dtype_compiled(C.DType.bf16) else torch.float16
    d = 128 if 128 in splitkv.compiled_head_dims() else splitkv.compiled_head_dims()[0]
    batch, hq, hkv, page, pages = 4, 32, 8, 16, 64  # a small paged decode: the host cost dominates
    q = torch.randn(batch, 1, hq, d, device="cuda").to(dtype)
    k = torch.randn(batch * pages, page, hkv, d, device="cuda").to(dtype)
    v = torch.randn_like(k)
    lens = torch.full((batch,), pages * page - 5, dtype=torch.int32, device="cuda")
    bt = torch.arange(batch * pages, dtype=torch.int32, device="cuda").view(batch, pages)
    out = torch.empty_like(q)
    num_splits = 4  # a workspace and a combine launch, as in long-context decode
    plan = splitkv.plan_decode(q, k, v, lens, bt, num_splits=num_splits)
    ws = torch.empty(max(plan.workspace_bytes, 16), dtype=torch.uint8, device="cuda")

    def desc(t):
        return (t.data_ptr(), _torch_ops._CODES[t.dtype], t.shape, t.stride())

    qd, kd, vd, sd, bd, od = (desc(t) for t in (q, k, v, lens, bt, out))
    ws_ptr, ws_n = ws.data_ptr(), ws.numel()
    stream = torch._C._cuda_getCurrentRawStream(dev)

    def raw():
        C.run_decode(plan, qd, kd, vd, sd, bd, od, None, ws_ptr, ws_n, stream, dev)

    def api():
        splitkv.decode(q, k, v, lens, bt, num_splits=num_splits, out=out, workspace=ws)

    def api_alloc():
        splitkv.decode(q, k, v, lens, bt, num_splits=num_splits)

    def op():
        torch.ops.splitkv.decode_out(q, k, v, lens, bt, out, None, ws, False, None, num_splits, 0, 0, None)

    def compat():
        flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, block_table=bt, num_splits=num_splits)

    torch.testing.assert_close(splitkv.decode(q, k, v, lens, bt, num_splits=num_splits),
                               flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, block_table=bt,
                                                       num_splits=num_splits), atol=0, rtol=0)

    eager = {name: host_us_per_call(fn, args.calls, args.bursts)
             for name, fn in [("raw", raw), ("api", api), ("api_alloc", api_alloc), ("op", op), ("compat", compat)]}

    def make_raw():
        capture_stream = torch._C._cuda_getCurrentRawStream(dev)  # the capture stream during capture
        return lambda: C.run_decode(plan, qd, kd, vd, sd, bd, od, None, ws_ptr, ws_n, capture_stream, dev)

    graph_calls, replays = 50, 40
    graph_raw = graph_us_per_call(make_raw, graph_calls, replays)
    graph_api = graph_us_per_call(lambda: api_alloc, graph_calls, replays)

    result = {
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "shape": dict(batch=batch, num_q_heads=hq, num_kv_heads=hkv, head_dim=d, page_size=page,
                      kv_len=pages * page - 5, num_splits=plan.num_splits, dtype=str(dtype).replace("torch.", "")),
        "raw_call_us": round(eager["raw"], 3),
        "eager_call_us": round(eager["api"], 3),
        "eager_overhead_us": round(eager["api"] - eager["raw"], 3),
        "eager_alloc_overhead_us": round(eager["api_alloc"] - eager["raw"], 3),
        "torch_op_overhead_us": round(eager["op"] - eager["raw"], 3),
        "compat_overhead_us": round(eager["compat"] - eager["raw"], 3),
        "graph_raw_us_per_call": round(graph_raw, 3),
        "graph_api_us_per_call": round(graph_api, 3),
        "graph_overhead_us": round(graph_api - graph_raw, 3),
        "targets": {"eager_overhead_us": 8.0, "graph_overhead_us": 0.5},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
