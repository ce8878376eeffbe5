#!/usr/bin/env python3
"""Merges splitkv's numbers with the peers' (same run) into bench/results/<suite>-latest.json and a
markdown table, with the ratios and the targets of docs/BENCHMARKING.md.

Rows are joined on (B, Hq, Hkv, Lq, Lk, D, dtype, causal); page_size and kv_cache are ignored, so a
paged row of ours gets the peers' times on the same shape with contiguous KV (the table says so), and
a prefill row over a KV cache those of the same shape on token tensors. A missing peer row or a
backend recorded as null shows as n/a, with the reason in the notes."""
import argparse
import json
import os

KEY_FIELDS = ("B", "Hq", "Hkv", "Lq", "Lk", "D", "dtype", "causal")
PEERS = ("cudnn", "flash")  # always shown; other peer entries (e.g. cutlass) are carried as <name>_us

# The original design's prefill table (D=64 fp16, non-causal): its claimed speedup over PyTorch's
# FlashAttention-2, keyed by (B, H, L).
DESIGN_X_FA2 = {(4, 12, 1024): 1.27, (4, 12, 4096): 1.66, (4, 12, 8192): 1.82, (2, 12, 16384): 2.03}
# Absolute prefill targets, TFLOP/s: D=128 bf16, 16k tokens, non-causal / causal.
PREFILL_TF_TARGET = {False: 640.0, True: 590.0}


def key(case):
    return tuple(case[f] for f in KEY_FIELDS)


def fmt(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


def ratio(peer_us, our_us):
    return None if peer_us is None or not our_us else peer_us / our_us


def short(text, n=80):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def kv_source(c):
    """Where a prefill row's keys come from: "-" K/V token tensors, "cache" a contiguous KV cache,
    "page N" a paged one, followed by the cache's format when it is quantized ("page 16 int4").
    Rows without kv_cache (results from before the cache rows) are token rows."""
    if not c.get("kv_cache"):
        return "-"
    source = f"page {c['page_size']}" if c.get("page_size") else "cache"
    fmt = c.get("kv_format", c.get("dtype"))
    return source if fmt in (None, c.get("dtype")) else f"{source} {fmt}"


def prefill_flops(c):
    """4 * B * Hq * D * (visible (query, key) pairs). Non-causal: Lq * Lk. Causal, aligned
    bottom-right: Lq * Lk - Lq^2 / 2 when Lq <= Lk (a square problem: half), Lk^2 / 2 otherwise."""
    lq, lk = c["Lq"], c["Lk"]
    if not c["causal"]:
        pairs = lq * lk
    elif lq <= lk:
        pairs = lq * lk - lq * lq / 2
    else:
        pairs = lk * lk / 2
    return 4.0 * c["B"] * c["Hq"] * c["D"] * pairs


def join_peers(ours_row, by_key):
    """The peers' entries for one of our rows: (peers dict for the JSON, notes for the table)."""
    c = ours_row["case"]
    p = by_key.get(key(c))
    peers, notes = {}, []
    if p is None:
        for name in PEERS:
            peers[f"{name}_us"] = None
        peers["errors"] = {name: "no peer row for this shape" for name in PEERS}
        notes.append("no peer row")
        return peers, notes
    errors, masks = {}, {}
    names = list(PEERS) + [n for n, v in p.items() if n not in PEERS and isinstance(v, dict) and "us" in v]
    for name in names:
        entry = p.get(name) or {}
        peers[f"{name}_us"] = entry.get("us")
        # A peer timed with an explicit mask and dense too (peers.py: cuDNN): the faster of the two.
        dense = entry.get("dense_us")
        if dense is not None and (entry.get("us") is None or dense < entry["us"]):
            peers[f"{name}_masked_us"] = entry.get("us")
            peers[f"{name}_us"] = dense
            notes.append(f"{name}: dense time (faster than its explicit mask)")
        if entry.get("us") is None:
            errors[name] = entry.get("error") or "not measured"
            notes.append(f"{name}: {short(errors[name])}")
        if entry.get("mask") not in (None, "none", "is_causal"):
            masks[name] = entry["mask"]
    if errors:
        peers["errors"] = errors
    if masks:
        peers["masks"] = masks
        notes.append("peer mask: " + ", ".join(f"{n} {m}" for n, m in masks.items()))
    if c.get("page_size", 0):
        peers["on_contiguous_kv"] = True
        notes.insert(0, "peers on contiguous KV")
    return peers, notes


def annotate(needs):
    return "; ".join(f"{text} {'met' if ok else 'MISSED'}" for text, ok in needs)


# Decode round-2 latency targets (B=1, 32/8 heads, one query): µs by Lk.
DECODE_LATENCY_US = {1024: 5.0, 4096: 7.9, 16384: 18.0}


def decode_target(case, us, cudnn_us, ceiling_fraction):
    """The decode targets for this row, and whether they are met."""
    needs = []
    speculative = case["Lq"] > 1
    latency_row = case["B"] == 1 and case["Hq"] == 32 and case["Hkv"] == 8 and case["Lq"] == 1
    if cudnn_us is not None:
        need = 1.0
        if speculative:
            need = 1.5
        elif latency_row and case["Lk"] <= 4096:
            need = 1.5
        elif latency_row and case["Lk"] == 16384:
            need = 1.3
        needs.append((f">={need}x cuDNN", cudnn_us / us >= need))
    if latency_row and case["Lk"] in DECODE_LATENCY_US:
        limit = DECODE_LATENCY_US[case["Lk"]]
        needs.append((f"<={limit} µs", us <= limit))
    kv_bytes = 2 * case["B"] * case["Lk"] * case["Hkv"] * case["D"] * 2
    if kv_bytes >= 64e6:
        floor = 0.90 if speculative else 0.95
        needs.append((f">={floor:.0%} ceiling", ceiling_fraction >= floor))
    text = annotate(needs)
    return text if cudnn_us is not None else (text + "; " if text else "") + "cuDNN target: no peer time"


def merge_decode(ours, peers):
    by_key = {key(r["case"]): r for r in peers.get("rows", [])}
    rows, lines = [], []
    ceiling = ours["ceiling_read_gbps"]
    for r in ours["rows"]:
        c = r["case"]
        peer, notes = join_peers(r, by_key)
        if str(c.get("family", "")).startswith("prefill"):  # PlanTuning::prefill_route
            notes.insert(0, f"served by chunked prefill ({c['family']})")
        cudnn_us, flash_us = peer["cudnn_us"], peer["flash_us"]
        bytes_moved = r["gbps"] * r["us"] * 1e3
        peer_gbps = [bytes_moved / (u * 1e3) for u in (cudnn_us, flash_us) if u]
        best_ceiling = max([ceiling] + peer_gbps)
        fraction = r["gbps"] / best_ceiling
        row = dict(r)
        row["peers"] = peer
        row["ceiling_fraction"] = fraction
        row["targets"] = decode_target(c, r["us"], cudnn_us, fraction)
        rows.append(row)
        lq = f"{c['Lq']}{' causal' if c.get('causal') else ''}"
        page = c.get("page_size", 0) or "-"
        lines.append(f"| {c['B']} | {c['Lk']:,} | {lq} | {c['Hq']}/{c['Hkv']} | {page} | {c.get('splits', 'n/a')} | "
                     f"{r['us']:.1f} | {r['gbps']:.0f} | {100 * fraction:.1f}% | {fmt(cudnn_us)} | {fmt(flash_us)} | "
                     f"{fmt(ratio(cudnn_us, r['us']), '.2f')} | {fmt(ratio(flash_us, r['us']), '.2f')} | "
                     f"{row['targets']} | {'; '.join(notes)} |")
    header = ("| B | Lk | Lq | Hq/Hkv | page | splits | splitkv µs | GB/s | of ceiling | cuDNN µs | flash µs | × cuDNN "
              "| × flash | targets | notes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    note = (f"Decode, bf16, D=128. Lq: queries per sequence ('causal': aligned bottom-right); page: KV page size "
            f"('-': contiguous [B, L, H, D]); the peers always run contiguous KV, so paged rows are compared with "
            f"the peers on the same shape, contiguous. CUDA-graph replays, cold L2 (input sets rotated over "
            f">= 1 GiB). Read ceiling (plain 16-byte read kernel, same run): {ceiling:.0f} GB/s; 'of ceiling' is "
            f"against the best of that and the peers' bandwidth. On causal rows with Lq < Lk cuDNN has no "
            f"bottom-right mask and runs an explicit one; where its time on the same shape without a mask (all "
            f"the pairs: an upper bound of the masked work) is faster, that time is its column (the notes say "
            f"so), so the ratio is never inflated by the mask.")
    return rows, header, lines, note


def prefill_targets(c, tflops, cudnn_us, flash_us, us):
    needs, missing = [], []
    chunked = c["Lq"] != c["Lk"]
    x_cudnn, x_flash = ratio(cudnn_us, us), ratio(flash_us, us)
    need_cudnn = 1.1 if chunked else 1.05
    if x_cudnn is None:
        missing.append(f">={need_cudnn}x cuDNN")
    else:
        needs.append((f">={need_cudnn}x cuDNN", x_cudnn >= need_cudnn))
    design = None
    if c["D"] == 64 and c["dtype"] == "fp16" and not c["causal"] and c["Hq"] == c["Hkv"] and not chunked:
        design = DESIGN_X_FA2.get((c["B"], c["Hq"], c["Lq"]))
    need_flash = design if design is not None else 1.1  # design table's ratio, else the earlier 1.1x FA2
    if x_flash is None:
        missing.append(f">={need_flash}x flash")
    else:
        needs.append((f">={need_flash}x flash", x_flash >= need_flash))
    if (c["D"] == 128 and c["dtype"] == "bf16" and c["Lq"] == c["Lk"] == 16384 and c["Hq"] == c["Hkv"]):
        need_tf = PREFILL_TF_TARGET[bool(c["causal"])]
        needs.append((f">={need_tf:.0f} TF", tflops >= need_tf))
    text = annotate(needs)
    if missing:
        text = (text + "; " if text else "") + "no peer time for " + ", ".join(missing)
    return text


def merge_prefill(ours, peers):
    by_key = {key(r["case"]): r for r in peers.get("rows", [])}
    with_cutlass = any("cutlass" in r for r in peers.get("rows", []))
    rows, lines = [], []
    for r in ours["rows"]:
        c = r["case"]
        peer, notes = join_peers(r, by_key)
        cudnn_us, flash_us = peer["cudnn_us"], peer["flash_us"]
        flops = prefill_flops(c)
        tf = lambda us: None if not us else flops / (us * 1e6)
        row = dict(r)
        tflops = tf(r["us"])
        if r.get("tflops") is not None and abs(r["tflops"] - tflops) > 0.01 * tflops:
            row["tflops_as_reported"] = r["tflops"]  # the tool counted FLOPs another way
        row["tflops"] = tflops
        row["peers"] = peer
        row["targets"] = prefill_targets(c, tflops, cudnn_us, flash_us, r["us"])
        rows.append(row)
        family = c.get("family") or r.get("family") or "-"
        if c["Lq"] != c["Lk"]:
            notes.insert(0, f"chunked: {c['Lq']:,} queries after {c['Lk'] - c['Lq']:,} tokens")
        cells = [c["B"], f"{c['Hq']}/{c['Hkv']}", f"{c['Lq']:,}", f"{c['Lk']:,}", c["D"], c["dtype"],
                 "yes" if c["causal"] else "no", kv_source(c), family, f"{tflops:.0f}", fmt(tf(cudnn_us), ".0f"),
                 fmt(tf(flash_us), ".0f"), fmt(ratio(cudnn_us, r["us"]), ".2f"), fmt(ratio(flash_us, r["us"]), ".2f")]
        if with_cutlass:  # the CUTLASS example's best kernel on the row
            cutlass_us = peer.get("cutlass_us")
            cells += [fmt(tf(cutlass_us), ".0f"), fmt(ratio(cutlass_us, r["us"]), ".2f")]
        cells += [row["targets"], "; ".join(notes)]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    columns = ["B", "Hq/Hkv", "Lq", "Lk", "D", "dtype", "causal", "KV", "family", "splitkv TFLOP/s", "cuDNN TFLOP/s",
               "flash TFLOP/s", "× cuDNN", "× flash"]
    if with_cutlass:
        columns += ["CUTLASS ex.88 TFLOP/s", "× CUTLASS"]
    columns += ["targets", "notes"]
    header = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns)
    note = ("Prefill, default strategy. Causal masks aligned bottom-right; chunked rows (Lq < Lk) are a chunk of Lq "
            "queries after Lk - Lq prefix tokens, and their FLOPs count the visible (query, key) pairs. KV: '-' K/V "
            "token tensors; 'cache' / 'page 16' one call over a KV cache that holds the prefix and the chunk, "
            "contiguous / paged (shuffled block table). The peers run contiguous token tensors (a cache row gets "
            "the peers' times of its shape) and, on chunked rows, the mask named in the notes; where cuDNN's time "
            "on the shape without a mask (all the pairs) beats its explicit mask, that time is its column (the notes "
            "say so). CUDA-graph replays, inputs rotated over >= 1 GiB; peers timed the same way.")
    if with_cutlass:
        note += (" CUTLASS ex.88: the fastest of the CUTLASS Hopper FMHA example's forward kernels for the head dim "
                 "(bench/cutlass_peer), timed the same way, on the dense rows with one KV head per query head.")
    return rows, header, lines, note


def merge_strategies(ours):
    table = {}
    for r in ours["rows"]:
        c = r["case"]
        table.setdefault(key(c) + (c.get("page_size", 0),), {})[c["variant"]] = r
    variants = ["default", "split-v", "two-pass", "k16-v64"]
    for r in ours["rows"]:  # any further variant gets its own column
        if r["case"]["variant"] not in variants:
            variants.append(r["case"]["variant"])
    tflops = lambda r: prefill_flops(r["case"]) / (r["us"] * 1e6)
    lines = []
    for k, by_variant in table.items():
        base = by_variant.get("default")
        cells = []
        for v in variants:
            r = by_variant.get(v)
            if r is None:
                cells.append("n/a")
            elif v == "default" or base is None:
                cells.append(f"{tflops(r):.0f}")
            else:
                cells.append(f"{tflops(r):.0f} ({tflops(r) / tflops(base):.2f}×)")
        c = dict(zip(KEY_FIELDS + ("page_size",), k))
        lines.append(f"| {c['B']} | {c['Hq']}/{c['Hkv']} | {c['Lq']:,} | {c['Lk']:,} | {c['D']} | {c['dtype']} | "
                     f"{'yes' if c['causal'] else 'no'} | {c['page_size'] or '-'} | " + " | ".join(cells) + " |")
    names = {"default": "default TFLOP/s", "split-v": "split-V", "k16-v64": "K 16 / V 64 tiles",
             "sm90-k128-v64": "sm90, K 128 / V 64 tiles", "sm90-m192": "sm90, 192 query rows"}
    header = ("| B | Hq/Hkv | Lq | Lk | D | dtype | causal | page | " + " | ".join(names.get(v, v) for v in variants)
              + " |\n|" + "---|" * (8 + len(variants)))
    note = "Prefill strategies (TFLOP/s; ratio to the default in parentheses), same run, same timing method."
    return ours["rows"], header, lines, note


# Quantized-cache decode targets (issue: speed-up over our bf16 decode on rows with >= 16k context or
# >= 64 MB of bf16 cache; short rows must not be slower than bf16).
QUANT_SPEEDUP_TARGET = {"fp8": 1.85, "int8": 1.8, "k8v4": 2.3, "int4": 3.0}


def merge_quant(ours):
    """Every KV format next to the 16-bit cache of the same shape (same run): time, bytes read per
    second, and the speed-up over 16-bit with the target where it applies."""
    by_shape = {}
    for r in ours["rows"]:
        c = r["case"]
        layout = " head-major" if c.get("kv_layout") == "head-major" else ""
        by_shape.setdefault(key(c) + (c.get("page_size", 0),), {})[c["kv_format"] + layout] = r
    lines = []
    for k, by_format in by_shape.items():
        c = dict(zip(KEY_FIELDS + ("page_size",), k))
        base = by_format.get(c["dtype"])
        bf16_mb = 2 * 2 * c["B"] * c["Lk"] * c["Hkv"] * c["D"] / 1e6
        long_row = c["Lk"] >= 16384 or bf16_mb >= 64
        for fmt_name, r in by_format.items():
            speedup = base["us"] / r["us"] if base and r is not base else None
            verdict = ""
            if speedup is not None:
                target = QUANT_SPEEDUP_TARGET.get(fmt_name.split(" ")[0])
                if long_row and target:
                    verdict = f">={target}x {'met' if speedup >= target else 'MISSED'}"
                elif not long_row:
                    verdict = f"not slower: {'met' if speedup >= 1.0 else 'MISSED'}"
            r["speedup_vs_16bit"] = speedup
            r["targets"] = verdict
            lines.append(f"| {c['B']} | {c['Hq']}/{c['Hkv']} | {c['Lq']}{'c' if c['causal'] else ''} | {c['Lk']:,} | "
                         f"{c['page_size'] or '-'} | {fmt_name} | {r['us']:.2f} | {r['gbps']:.0f} | "
                         f"{100 * r['gbps'] / ours['ceiling_read_gbps']:.0f}% | {fmt(speedup, '.2f')} | {verdict} |")
    header = ("| B | Hq/Hkv | Lq | Lk | page | KV format | µs | GB/s read | % of ceiling | × 16-bit | target |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")
    note = (f"Decode over quantized KV caches, D={ours['rows'][0]['case']['D'] if ours['rows'] else '?'}: every format "
            "next to the 16-bit cache of the same shape, same run. GB/s counts the bytes a call must read as stored "
            "(codes, per-token scales, Q and O); 'head-major': the same cache stored [slabs, Hkv, tokens, D] "
            "(the 16-bit row it is compared with is token-major); read ceiling "
            f"{ours['ceiling_read_gbps']:.0f} GB/s. CUDA-graph replays, inputs rotated over >= 1 GiB.")
    return ours["rows"], header, lines, note


MIXED_TARGET = 1.15  # issue 54: the one call >= 1.15x faster than the separate calls' total


def cudnn_best(entry):
    """cuDNN's time on a row: the faster of its masked call and its dense one (the merge rule of the
    prefill rows with Lq < Lk); None when it did not run."""
    if not entry or entry.get("us") is None:
        return None
    dense = entry.get("dense_us")
    return min(entry["us"], dense) if dense is not None else entry["us"]


def merge_mixed(ours, peers=None):
    """A serving step as one call next to the separate calls of its parts (captured back to back),
    each part alone, and (peers) cuDNN's calls for the parts, summed."""
    by_step = {}
    for r in ours["rows"]:
        c = r["case"]
        by_step.setdefault((c["mix"], c["kv_format"]), {})[c["variant"]] = r
    cudnn_parts = {}
    for r in (peers or {}).get("rows", []):
        c = r["case"]
        if "mix" in c:
            cudnn_parts.setdefault(c["mix"], []).append(cudnn_best(r.get("cudnn")))
    lines = []
    for (mix, kv), v in by_step.items():
        one, separate, route = v.get("mixed"), v.get("separate"), v.get("mixed route")
        side = v.get("separate, side by side")
        serial = v.get("mixed route, serial")
        serial_gain = separate["us"] / serial["us"] if serial and separate else None
        if serial_gain is not None:
            serial["x_separate"] = serial_gain
        gain = separate["us"] / one["us"] if one and separate else None
        route_gain = separate["us"] / route["us"] if route and separate else None
        if route_gain is not None:
            route["x_separate"] = route_gain
            route["targets"] = f">={MIXED_TARGET}x {'met' if route_gain >= MIXED_TARGET else 'MISSED'}"
        parts_us = cudnn_parts.get(mix)
        cudnn_total = sum(parts_us) if parts_us and None not in parts_us else None
        if gain is not None:
            one["x_separate"] = gain
        parts = "; ".join(f"{name[len('part: '):]} {r['us']:.1f} µs ({r['case']['family']}, "
                          + (f"{r['gbps']:.0f} GB/s" if "gbps" in r else f"{r.get('tflops', 0):.0f} TFLOP/s") + ")"
                          for name, r in v.items() if name.startswith("part: "))
        # The default call (the route) against cuDNN's parts.
        default = route or one
        x_cudnn = cudnn_total / default["us"] if default and cudnn_total and kv == "bf16" else None
        if default is not None:
            default["cudnn_parts_us"] = cudnn_total
        lines.append(f"| {mix} | {kv} | {fmt(route and route['us'])} | {fmt(separate and separate['us'])} | "
                     f"{fmt(route_gain, '.2f')} | {route.get('targets', '') if route else ''} | "
                     f"{fmt(one and one['us'])} ({one['case']['family'] if one else '-'}) | {fmt(gain, '.2f')} | "
                     f"{fmt(serial and serial['us'])} | {fmt(serial_gain, '.2f')} | "
                     f"{fmt(side and side['us'])} | "
                     f"{parts} | {fmt(cudnn_total) if kv == 'bf16' else '-'} | {fmt(x_cudnn, '.2f')} |")
    header = ("| step | KV | mixed route µs (default) | separate calls µs | route × separate | target | "
              "without the route µs (family) | × separate | serial route µs | serial × separate | side by side µs | "
              "parts alone | cuDNN parts µs | route × cuDNN |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    note = ("Mixed serving steps (32/8 heads, D=128, bf16 queries, 16-token pages; docs/MIXED_BATCH.md): the step as "
            "one call (run_prefill over the paged cache, varlen queries) against the separate calls of its parts "
            "(chunked prefill for the chunks, one decode call per query count) captured back to back in one CUDA "
            "graph, and each part alone. 'mixed route': the call as it runs by default (PlanTuning::mixed_route: "
            "short rows on the decode kernels beside the prefill tiles, two streams inside the call); "
            "'× separate' = separate total / the call (issue 54's target: >= 1.15); 'without the route': the same "
            "call with mixed_route off (every sequence as prefill tiles); 'serial route': the route with "
            "PlanTuning::mixed_route_serial (its parts one after the other); 'side by side': the separate calls on "
            "two streams (the chunks' call on a high-priority one), what two streams give the parts with their own "
            "plans. CUDA-graph replays, one input set per step (each >= 1 GiB of cache). cuDNN parts: PyTorch "
            "SDPA's cuDNN backend, one call per part on contiguous K/V (bf16 only), the faster of its masked and "
            "dense calls where Lq < Lk; ragged decode rows timed as the same count at their mean length.")
    return ours["rows"], header, lines, note


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", choices=["decode", "prefill", "strategies", "quant", "variants", "variants-prefill",
                                            "mixed"],
                        required=True)
    parser.add_argument("--ours", required=True)
    parser.add_argument("--peers")
    parser.add_argument("--cutlass", help="prefill: splitkv_cutlass_peer's JSON, joined into the peers' rows")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.ours) as f:
        ours = json.load(f)
    peers = {"rows": []}
    if args.peers and os.path.exists(args.peers):
        with open(args.peers) as f:
            peers = json.load(f)
    if args.cutlass and os.path.exists(args.cutlass):
        with open(args.cutlass) as f:
            by_key = {key(r["case"]): r for r in peers["rows"]}
            for r in json.load(f)["rows"]:
                if key(r["case"]) in by_key:
                    by_key[key(r["case"])]["cutlass"] = r["cutlass"]
                else:
                    peers["rows"].append(r)
    if args.suite == "decode":
        rows, header, lines, note = merge_decode(ours, peers)
    elif args.suite == "prefill":
        rows, header, lines, note = merge_prefill(ours, peers)
    elif args.suite == "quant":
        rows, header, lines, note = merge_quant(ours)
    elif args.suite == "mixed":
        rows, header, lines, note = merge_mixed(ours, peers)
    elif args.suite.startswith("variants"):
        from variants_table import merge_variants
        rows, header, lines, note = merge_variants(ours, peers, prefill=args.suite == "variants-prefill")
    else:
        rows, header, lines, note = merge_strategies(ours)
    result = {k: v for k, v in ours.items() if k != "rows"}
    result["peer_versions"] = {k: peers.get(k) for k in ("torch", "cudnn")}
    result["rows"] = rows
    with open(os.path.join(args.out, f"{args.suite}-latest.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, f"{args.suite}-latest.md"), "w") as f:
        f.write(f"# {args.suite} — {ours.get('gpu')} — {ours.get('date')} — commit {ours.get('commit')}\n\n")
        f.write(note + "\n\n" + header + "\n" + "\n".join(lines) + "\n")
    # The plot next to the table; the baselines' plots are also the README's (docs/img/<suite>.png).
    import shutil
    from plot_results import render
    plot = render(os.path.join(args.out, f"{args.suite}-latest.json"))
    if plot and os.path.abspath(args.out) == os.path.abspath(os.path.join(os.path.dirname(__file__), "results")):
        img = os.path.join(os.path.dirname(__file__), "..", "docs", "img")
        os.makedirs(img, exist_ok=True)
        shutil.copyfile(plot, os.path.join(img, f"{args.suite}.png"))


if __name__ == "__main__":
    main()
