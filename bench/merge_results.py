#!/usr/bin/env python3
"""Merges splitkv's numbers with the peers' (same run) into bench/results/<suite>-latest.json and a
markdown table, with the ratios and the targets of the issues."""
import argparse
import json
import os

KEY_FIELDS = ("B", "Hq", "Hkv", "Lq", "Lk", "D", "dtype", "causal")


def key(case):
    return tuple(case[f] for f in KEY_FIELDS)


def peer_us(peer_row, name):
    entry = (peer_row or {}).get(name) or {}
    return entry.get("us"), entry.get("error")


def fmt(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


def decode_target(case, us, cudnn_us, ceiling_fraction):
    """The decode issue's targets for this row, and whether they are met."""
    needs = []
    if cudnn_us is not None:
        need = 1.0
        if case["B"] == 1 and case["Hq"] == 32 and case["Hkv"] == 8 and case["Lk"] <= 4096:
            need = 1.5
        elif case["B"] == 1 and case["Hq"] == 32 and case["Hkv"] == 8 and case["Lk"] == 16384:
            need = 1.3
        needs.append((f">={need}x cuDNN", cudnn_us / us >= need))
    kv_bytes = 2 * case["B"] * case["Lk"] * case["Hkv"] * case["D"] * 2
    if kv_bytes >= 64e6:
        needs.append((">=95% ceiling", ceiling_fraction >= 0.95))
    return "; ".join(f"{text} {'met' if ok else 'MISSED'}" for text, ok in needs)


def merge_decode(ours, peers):
    by_key = {key(r["case"]): r for r in peers.get("rows", [])}
    rows, lines = [], []
    ceiling = ours["ceiling_read_gbps"]
    for r in ours["rows"]:
        p = by_key.get(key(r["case"]))
        cudnn_us, cudnn_err = peer_us(p, "cudnn")
        flash_us, flash_err = peer_us(p, "flash")
        bytes_moved = r["gbps"] * r["us"] * 1e3
        peer_gbps = [bytes_moved / (u * 1e3) for u in (cudnn_us, flash_us) if u]
        best_ceiling = max([ceiling] + peer_gbps)
        fraction = r["gbps"] / best_ceiling
        row = dict(r)
        row["peers"] = {"cudnn_us": cudnn_us, "flash_us": flash_us}
        if cudnn_err or flash_err:
            row["peers"]["errors"] = {"cudnn": cudnn_err, "flash": flash_err}
        row["ceiling_fraction"] = fraction
        row["targets"] = decode_target(r["case"], r["us"], cudnn_us, fraction)
        rows.append(row)
        c = r["case"]
        lines.append(f"| {c['B']} | {c['Lk']:,} | {c['Hq']}/{c['Hkv']} | {c['splits']} | {r['us']:.1f} | "
                     f"{r['gbps']:.0f} | {100 * fraction:.1f}% | {fmt(cudnn_us)} | {fmt(flash_us)} | "
                     f"{fmt(cudnn_us and cudnn_us / r['us'], '.2f')} | {fmt(flash_us and flash_us / r['us'], '.2f')} | "
                     f"{row['targets']} |")
    header = ("| B | Lk | Hq/Hkv | splits | splitkv µs | GB/s | of ceiling | cuDNN µs | flash µs | × cuDNN | × flash "
              "| targets |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    note = (f"Decode, bf16, D=128, one query per sequence, contiguous KV [B, L, H, D]. CUDA-graph replays, cold L2 "
            f"(input sets rotated over >= 1 GiB). Read ceiling (plain 16-byte read kernel, same run): "
            f"{ceiling:.0f} GB/s; 'of ceiling' is against the best of that and the peers' bandwidth.")
    return rows, header, lines, note


def merge_prefill(ours, peers):
    by_key = {key(r["case"]): r for r in peers.get("rows", [])}
    rows, lines = [], []
    for r in ours["rows"]:
        p = by_key.get(key(r["case"]))
        cudnn_us, _ = peer_us(p, "cudnn")
        flash_us, _ = peer_us(p, "flash")
        flops = r["tflops"] * r["us"] * 1e6
        tf = lambda us: us and flops / (us * 1e6)
        row = dict(r)
        row["peers"] = {"cudnn_us": cudnn_us, "flash_us": flash_us}
        x_flash = flash_us and flash_us / r["us"]
        row["targets"] = "" if x_flash is None else f">=1.1x flash {'met' if x_flash >= 1.1 else 'MISSED'}"
        rows.append(row)
        c = r["case"]
        lines.append(f"| {c['B']} | {c['Hq']} | {c['Lq']:,} | {c['D']} | {c['dtype']} | {'yes' if c['causal'] else 'no'} "
                     f"| {r['tflops']:.0f} | {fmt(tf(cudnn_us), '.0f')} | {fmt(tf(flash_us), '.0f')} | "
                     f"{fmt(x_flash, '.2f')} | {fmt(cudnn_us and cudnn_us / r['us'], '.2f')} | {row['targets']} |")
    header = ("| B | H | L | D | dtype | causal | splitkv TFLOP/s | cuDNN TFLOP/s | flash TFLOP/s | × flash | × cuDNN "
              "| target |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    note = "Prefill, default strategy. CUDA-graph replays, inputs rotated over >= 1 GiB; peers timed the same way."
    return rows, header, lines, note


def merge_strategies(ours):
    table = {}
    for r in ours["rows"]:
        c = r["case"]
        table.setdefault(key(c), {})[c["variant"]] = r
    variants = ["default", "split-v", "two-pass", "founding-tiles"]
    lines = []
    for k, by_variant in table.items():
        base = by_variant.get("default")
        cells = []
        for v in variants:
            r = by_variant.get(v)
            if r is None:
                cells.append("n/a")
            elif v == "default" or base is None:
                cells.append(f"{r['tflops']:.0f}")
            else:
                cells.append(f"{r['tflops']:.0f} ({r['tflops'] / base['tflops']:.2f}×)")
        c = dict(zip(KEY_FIELDS, k))
        lines.append(f"| {c['B']} | {c['Hq']} | {c['Lq']:,} | {c['D']} | {c['dtype']} | "
                     f"{'yes' if c['causal'] else 'no'} | " + " | ".join(cells) + " |")
    header = ("| B | H | L | D | dtype | causal | default TFLOP/s | split-V | two-pass | founding-notes tiles |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    note = "Prefill strategies (TFLOP/s; ratio to the default in parentheses), same run, same timing method."
    return ours["rows"], header, lines, note


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", choices=["decode", "prefill", "strategies"], required=True)
    parser.add_argument("--ours", required=True)
    parser.add_argument("--peers")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ours = json.load(open(args.ours))
    peers = json.load(open(args.peers)) if args.peers and os.path.exists(args.peers) else {"rows": []}
    if args.suite == "decode":
        rows, header, lines, note = merge_decode(ours, peers)
    elif args.suite == "prefill":
        rows, header, lines, note = merge_prefill(ours, peers)
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


if __name__ == "__main__":
    main()
