#!/usr/bin/env python3
"""Times the peers (PyTorch SDPA with the cuDNN and FlashAttention-2 backends) on the suites of
docs/BENCHMARKING.md, the way `splitkv bench` times splitkv: CUDA-graph replays of back-to-back calls
rotating over input sets of >= 1 GiB in total (cold L2), median of the replays, per call.

Layout [B, H, L, D] (what SDPA takes); GQA through enable_gqa=True. The peers always read
contiguous KV tensors: a suite shape that splitkv runs on paged KV, or (chunked prefill) over a KV
cache, is timed once, on its contiguous shape, and merge_results.py joins all those rows of ours to it.

Causal rows with Lq < Lk (speculative decode, chunked prefill) need the mask aligned bottom-right
(query i sees keys [0, Lk - Lq + i]); SDPA's is_causal aligns top-left. Per backend the methods are
tried in order and the row records the one that ran:
  causal_lower_right  torch.nn.attention.bias.causal_lower_right(Lq, Lk), only where it dispatches
                      to a fused kernel with a native bottom-right mask (FlashAttention-2); for other
                      backends it would build a [Lq, Lk] mask on every call, so it is skipped;
  explicit_additive   a precomputed [1, 1, Lq, Lk] mask in the query dtype (0 / -inf);
  explicit_bool       a precomputed [1, 1, Lq, Lk] boolean mask (True = attend).
Square causal rows use is_causal=True (top-left and bottom-right coincide). Where cuDNN can only
take an explicit mask, it is also timed on the same shape without any mask (dense_us: an upper bound
of the masked work, which its masked path often exceeds several times); merge_results.py compares
with the faster of the two and says so. A backend that refuses a shape is recorded as null with the
reason; an exception in one row never stops the suite.

    python3 bench/peers.py --suite decode|prefill|mixed --json out.json [--filter TEXT]
"""
import argparse
import datetime
import json
import math
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:
    from torch.nn.attention.bias import causal_lower_right
except ImportError:  # pragma: no cover - older torch
    causal_lower_right = None

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
GIB = 1 << 30
WARMUP_SECONDS = 0.5  # tools/gpu_timing.hpp: kWarmupSeconds
MAX_ROUNDS = 6  # timed rounds at most (tools/gpu_timing.hpp kMaxRounds)
STEADY_SPREAD = 0.02  # (kSteadySpread)

# Decode suite: bf16, D=128. (B, Lk, Hq, Hkv, q_len, causal, page sizes splitkv runs the shape with;
# 0 = contiguous). The peers time each shape once, on contiguous KV.
DECODE = [(1, 1024, 32, 8, 1, False, (0,)), (1, 4096, 32, 8, 1, False, (0,)), (1, 16384, 32, 8, 1, False, (0,)),
          (1, 65536, 32, 8, 1, False, (0,)), (1, 131072, 32, 8, 1, False, (0, 16, 64)),
          (8, 8192, 32, 8, 1, False, (0,)), (8, 32768, 32, 8, 1, False, (0, 16, 64)),
          (32, 4096, 32, 8, 1, False, (0,)), (64, 2048, 32, 8, 1, False, (0,)), (128, 1024, 32, 8, 1, False, (0,)),
          (1, 32768, 32, 32, 1, False, (0,)), (4, 32768, 64, 8, 1, False, (0,)),
          # speculative decode: 2, 4 or 8 queries, causal bottom-right
          (8, 8192, 32, 8, 4, True, (0,)), (8, 8192, 32, 8, 2, True, (0,)), (8, 8192, 32, 8, 8, True, (0,)),
          (8, 8192, 28, 4, 2, True, (0,)), (8, 8192, 28, 4, 4, True, (0,)), (8, 8192, 28, 4, 8, True, (0,))]

# Prefill suite: (B, Hq, Hkv, Lq, Lk, D, dtype, causal, page sizes splitkv runs the shape with).
# Chunked rows: a chunk of Lq queries after a prefix of Lk - Lq tokens; splitkv runs them on K/V
# token tensors and over a KV cache, contiguous (both page size 0) and paged.
PREFILL = [(4, 12, 12, 1024, 1024, 64, "fp16", False, (0,)), (4, 12, 12, 4096, 4096, 64, "fp16", False, (0,)),
           (4, 12, 12, 8192, 8192, 64, "fp16", False, (0,)), (2, 12, 12, 16384, 16384, 64, "fp16", False, (0,)),
           (16, 16, 16, 1024, 1024, 128, "bf16", False, (0,)), (4, 16, 16, 4096, 4096, 128, "bf16", False, (0,)),
           (1, 16, 16, 16384, 16384, 128, "bf16", False, (0,)), (16, 16, 16, 1024, 1024, 128, "bf16", True, (0,)),
           (4, 16, 16, 4096, 4096, 128, "bf16", True, (0,)), (1, 16, 16, 16384, 16384, 128, "bf16", True, (0,)),
           (4, 16, 16, 4096, 4096, 256, "bf16", False, (0,)), (4, 16, 16, 4096, 4096, 256, "bf16", True, (0,)),
           (4, 32, 8, 4096, 4096, 128, "bf16", True, (0,)),
           (1, 32, 8, 1024, 32768 + 1024, 128, "bf16", True, (0, 16, 256)),
           (1, 32, 8, 4096, 32768 + 4096, 128, "bf16", True, (0, 16)),
           (8, 32, 8, 256, 8192 + 256, 128, "bf16", True, (0, 16, 256)),
           (8, 32, 8, 32, 8192 + 32, 128, "bf16", True, (0, 16))]

# Mixed suite (tools/gpu_mixed.cpp, same names): a serving step's parts, each timed as its own SDPA
# call on contiguous K/V (32/8 heads, D=128, bf16): (count, q_len, kv_lo, kv_hi) per group. A group
# of rows with ragged lengths (kv_lo < kv_hi, spread evenly) is timed as `count` rows at the mean
# length: the same bytes read, no padding charged to the peer.
MIXED = [("a: 2048-query chunk over 8k + 63 rows 1k-32k", [(63, 1, 1024, 32768), (1, 2048, 10240, 10240)]),
         ("b: 8 first chunks of 512 + 120 rows at 4k", [(120, 1, 4096, 4096), (8, 512, 512, 512)]),
         ("c: 256 rows at 2k + 32 speculative rows of 4 at 8k", [(256, 1, 2048, 2048), (32, 4, 8192, 8192)])]

MASK_METHODS = ("causal_lower_right", "explicit_additive", "explicit_bool")


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
    # At least WARMUP_SECONDS of replays (the same as splitkv's harness): rows are timed at the
    # clocks the card holds under sustained load, after its power cap has engaged.
    warmup_start = time.perf_counter()
    replayed = 0
    while replayed < 3 or time.perf_counter() - warmup_start < WARMUP_SECONDS:
        graph.replay()
        torch.cuda.synchronize()
        replayed += 1
    # Rounds until the last two agree within STEADY_SPREAD (at most MAX_ROUNDS), as splitkv's harness.
    rounds = []
    while len(rounds) < 2 or (len(rounds) < MAX_ROUNDS and spread_of(rounds) > STEADY_SPREAD):
        times = []
        for _ in range(replays):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3 / calls)
        rounds.append(statistics.median(times))
    return rounds[-1], spread_of(rounds)


def spread_of(rounds):
    """|last but one - last| / last of two or more round times."""
    return abs(rounds[-2] - rounds[-1]) / rounds[-1]


def reason(exc, caught):
    """First line of the exception, plus the first backend warnings (they say why a kernel refused)."""
    text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    notes = []
    for w in caught:
        line = str(w.message).splitlines()[0][:160]
        if line and line not in notes:
            notes.append(line)
    return text + ("" if not notes else " [" + "; ".join(notes[:3]) + "]")


def cleanup():
    try:
        torch.cuda.synchronize()
    except Exception:  # a sticky CUDA error: later rows will record it too
        pass
    torch.cuda.empty_cache()


def time_sdpa(data, backend, make_kwargs):
    """Times SDPA on the input sets with one backend; {"us", "spread"} or {"us": None, "error"}."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            kwargs = make_kwargs()

            def call(i):
                q, k, v = data[i]
                with sdpa_kernel(BACKENDS[backend]):
                    return F.scaled_dot_product_attention(q, k, v, **kwargs)

            us, spread = time_graph(call, len(data))
            return {"us": us, "spread": spread}
        except Exception as e:  # a backend refusing a shape is a result, not a crash
            return {"us": None, "error": reason(e, caught)}
        finally:
            cleanup()


def lower_right_is_native(q, k, v, backend, gqa):
    """Whether causal_lower_right dispatches to a fused kernel under this backend (else CausalBias
    materializes the mask on every call)."""
    from torch.backends.cuda import SDPAParams, can_use_efficient_attention, can_use_flash_attention
    with sdpa_kernel(BACKENDS[backend]):
        params = SDPAParams(q, k, v, None, 0.0, False, gqa)
        return bool(can_use_flash_attention(params) or can_use_efficient_attention(params))


def explicit_mask(lq, lk, dtype, additive):
    """[1, 1, Lq, Lk] bottom-right causal mask: query i sees keys [0, Lk - Lq + i]."""
    visible = torch.ones(lq, lk, device="cuda", dtype=torch.bool).tril(diagonal=lk - lq)
    if not additive:
        return visible.view(1, 1, lq, lk)
    mask = torch.zeros(lq, lk, device="cuda", dtype=dtype)
    mask.masked_fill_(~visible, float("-inf"))
    return mask.view(1, 1, lq, lk)


def measure(make_inputs, set_bytes, lq, lk, causal, gqa, dtype):
    """Times every backend on one shape; returns {backend: entry}. Each entry: us, spread, mask
    (how causality was expressed) or us=None with error (and the mask attempts)."""
    result = {}
    data = []
    try:
        sets = int(min(64, max(1, math.ceil(GIB / set_bytes))))
        for i in range(sets):
            data.append(make_inputs(i))
    except Exception as e:
        del data
        cleanup()
        err = {"us": None, "error": "inputs: " + str(e).splitlines()[0][:200]}
        return {name: dict(err) for name in BACKENDS}

    base = {"enable_gqa": gqa} if gqa else {}
    for name in BACKENDS:
        if not causal or lq == lk or lq == 1:
            # Square causal: top-left = bottom-right. One query (lq == 1) sees every key.
            mask = "is_causal" if causal and lq == lk else "none"
            entry = time_sdpa(data, name, lambda: dict(base, is_causal=(causal and lq == lk)))
            entry["mask"] = mask
            result[name] = entry
            continue
        attempts = []
        entry = None
        for method in MASK_METHODS:
            if method == "causal_lower_right":
                if causal_lower_right is None:
                    attempts.append({"mask": method, "error": "torch.nn.attention.bias.causal_lower_right missing"})
                    continue
                try:
                    native = lower_right_is_native(*data[0], name, gqa)
                except Exception:
                    native = None  # cannot tell: FlashAttention refuses a materialized mask, so trying is safe
                if not (native or (native is None and name == "flash")):
                    attempts.append({"mask": method, "error": "skipped: no fused bottom-right path under this "
                                                              "backend (it would build a [Lq, Lk] mask every call)"})
                    continue
                make = lambda: dict(base, attn_mask=causal_lower_right(lq, lk))
            else:
                make = lambda additive=(method == "explicit_additive"): dict(
                    base, attn_mask=explicit_mask(lq, lk, dtype, additive))
            trial = time_sdpa(data, name, make)
            if trial["us"] is not None:
                entry = dict(trial, mask=method)
                break
            attempts.append({"mask": method, "error": trial["error"]})
            cleanup()
        if entry is None:
            entry = {"us": None, "error": "; ".join(f"{a['mask']}: {a['error']}" for a in attempts)}
        if attempts:
            entry["mask_attempts"] = attempts
        if name == "cudnn" and entry.get("mask", "").startswith("explicit"):
            dense = time_sdpa(data, name, lambda: dict(base))  # no mask: every (query, key) pair
            entry["dense_us"] = dense["us"]
            if dense["us"] is None:
                entry["dense_error"] = dense.get("error")
        result[name] = entry
    del data
    cleanup()
    return result


def make_maker(b, hq, hkv, lq, lk, d, torch_dtype):
    def make(i):
        g = torch.Generator(device="cuda").manual_seed(i)
        mk = lambda *s: torch.randn(*s, device="cuda", dtype=torch_dtype, generator=g)
        return mk(b, hq, lq, d), mk(b, hkv, lk, d), mk(b, hkv, lk, d)
    return make


def run_row(label, b, hq, hkv, lq, lk, d, dtype, causal, page_sizes):
    row = {"case": {"B": b, "Hq": hq, "Hkv": hkv, "Lq": lq, "Lk": lk, "D": d, "dtype": dtype, "causal": causal,
                    "page_size": 0},
           "label": label, "kv_layout": "contiguous", "serves_page_sizes": list(page_sizes)}
    try:
        torch_dtype = DTYPES[dtype]
        set_bytes = 2 * (2 * b * hkv * lk * d + 2 * b * hq * lq * d)  # K + V + Q + O, 2 bytes each
        row.update(measure(make_maker(b, hq, hkv, lq, lk, d, torch_dtype), set_bytes, lq, lk, causal, hq != hkv,
                           torch_dtype))
    except Exception as e:  # never abort the suite
        for name in BACKENDS:
            row.setdefault(name, {"us": None, "error": "row: " + str(e).splitlines()[0][:200]})
        cleanup()
    print(f"{label}: " + ", ".join(f"{n} {row[n].get('us')} ({row[n].get('mask', '-')})" for n in BACKENDS),
          flush=True)
    return row


def decode_rows(selected):
    rows = []
    for b, lk, hq, hkv, q_len, causal, pages in DECODE:
        label = f"decode B={b} Lk={lk} {hq}/{hkv} q_len={q_len}{' causal' if causal else ''}"
        if selected(label):
            rows.append(run_row(label, b, hq, hkv, q_len, lk, 128, "bf16", causal, pages))
    return rows


def prefill_rows(selected):
    rows = []
    for b, hq, hkv, lq, lk, d, dtype, causal, pages in PREFILL:
        label = (f"prefill B={b} {hq}/{hkv} Lq={lq} Lk={lk} D={d} {dtype}{' causal' if causal else ''}"
                 f"{' chunked' if lq != lk else ''}")
        if selected(label):
            rows.append(run_row(label, b, hq, hkv, lq, lk, d, dtype, causal, pages))
    return rows


def mixed_rows(selected):
    """One row per part of each mixed step; case.mix names the step, case.part the group."""
    rows = []
    for mix, groups in MIXED:
        if not selected(mix):
            continue
        for count, q_len, kv_lo, kv_hi in groups:
            lk = (kv_lo + kv_hi) // 2
            part = "decode rows" if q_len == 1 else "speculative rows" if q_len <= 16 else "chunks"
            label = f"mixed {mix}: {part} B={count} Lq={q_len} Lk={lk}{' (mean)' if kv_lo != kv_hi else ''}"
            row = run_row(label, count, 32, 8, q_len, lk, 128, "bf16", True, (16,))
            row["case"].update(mix=mix, part=part, mean_length=kv_lo != kv_hi)
            rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=["decode", "prefill", "mixed"], required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--filter", default="", help="only rows whose label contains this text (e.g. 'chunked')")
    args = parser.parse_args()
    selected = lambda label: args.filter in label
    rows = {"decode": decode_rows, "prefill": prefill_rows, "mixed": mixed_rows}[args.suite](selected)
    try:
        gpu = torch.cuda.get_device_name(0)
    except Exception:
        gpu = None
    with open(args.json, "w") as f:
        json.dump({"suite": args.suite, "date": datetime.date.today().isoformat(), "gpu": gpu,
                   "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
