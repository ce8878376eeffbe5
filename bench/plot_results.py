#!/usr/bin/env python3
"""Plots of a suite's merged results (bench/results/<suite>-latest.json, written by merge_results.py),
next to its table: <suite>-latest.png in the same folder, or --out.

  decode   GB/s read against the context (B=1 and B=8, 32/8 heads, contiguous 16-bit cache) with the
           card's read ceiling and the peers (their GB/s: the same bytes over their time); beside it
           the speed-up over cuDNN and FlashAttention on every row of the suite.
  prefill  TFLOP/s against the sequence length on the plain token rows (D=64 fp16 and D=128 bf16,
           causal and not) with cuDNN, FlashAttention-2 (both through PyTorch's SDPA) and the CUTLASS
           Hopper FMHA example.
  quant    the speed-up of each quantized format over the 16-bit cache of the same row, with the
           byte bound (the 16-bit cache's bytes per token over the format's).

Every number is one of the JSON's (ours and the peers' times of the same run). Needs matplotlib;
without it, says so and writes nothing (merge_results.py then carries on).

Usage: plot_results.py SUITE_JSON [--out PNG]
"""
import argparse
import json
import os
import sys

# Bytes per token and KV head at D=128 (docs/KV_FORMATS.md, "Bytes per token and KV head"): K + V
# codes and per-token scales.
BYTES_PER_TOKEN_D128 = {"bf16": 512, "fp16": 512, "fp8": 256, "int8": 264, "int4": 136, "k8v4": 200}


def _peer_rate(rate, us, peer_us):
    """A peer's rate on the same work: ours scaled by our time over theirs."""
    return None if not peer_us or not us or rate is None else rate * us / peer_us


def plot_decode(result, plt):
    rows = result["rows"]
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1, 1.3]})
    colors = {"ours": "C0", "cudnn": "C1", "flash": "C2"}
    for batch, marker, line in ((1, "o", "-"), (8, "s", "--")):
        series = sorted(
            (r for r in rows if r["case"]["B"] == batch and r["case"]["Hq"] == 32 and r["case"]["Hkv"] == 8
             and r["case"]["Lq"] == 1 and not r["case"].get("page_size") and r["case"].get("kv_format") in
             (None, "bf16", "fp16")),
            key=lambda r: r["case"]["Lk"])
        if not series:
            continue
        lk = [r["case"]["Lk"] for r in series]
        ax.plot(lk, [r["gbps"] for r in series], line, marker=marker, color=colors["ours"], label=f"splitkv B={batch}")
        for peer in ("cudnn", "flash"):
            rates = [_peer_rate(r["gbps"], r["us"], r.get("peers", {}).get(f"{peer}_us")) for r in series]
            if any(x is not None for x in rates):
                ax.plot(lk, [float("nan") if x is None else x for x in rates], line, marker=marker, color=colors[peer],
                        alpha=0.8, label=f"{'cuDNN' if peer == 'cudnn' else 'FlashAttention-2'} (SDPA) B={batch}")
    if result.get("ceiling_read_gbps"):
        ax.axhline(result["ceiling_read_gbps"], color="black", linewidth=1)
        ax.annotate(f"read ceiling {result['ceiling_read_gbps']:.0f} GB/s", (0.02, result["ceiling_read_gbps"]),
                    xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (keys)")
    ax.set_ylabel("GB/s read")
    ax.set_title("Decode, 32/8 heads, D=128, bf16 cache")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)

    labels, x_cudnn, x_flash = [], [], []
    for r in rows:
        c = r["case"]
        peers = r.get("peers", {})
        masked = "explicit" in " ".join(str(m) for m in peers.get("masks", {}).values())
        labels.append(f"B{c['B']} {c['Hq']}/{c['Hkv']} q{c['Lq']} {c['Lk'] // 1024}k" +
                      (f" p{c['page_size']}" if c.get("page_size") else "") + (" *" if masked else ""))
        x_cudnn.append(peers["cudnn_us"] / r["us"] if peers.get("cudnn_us") else 0.0)
        x_flash.append(peers["flash_us"] / r["us"] if peers.get("flash_us") else 0.0)
    ys = range(len(labels))
    bars.barh([y - 0.2 for y in ys], x_cudnn, height=0.4, label="x cuDNN (SDPA)")
    bars.barh([y + 0.2 for y in ys], x_flash, height=0.4, label="x FlashAttention-2 (SDPA)")
    bars.axvline(1.0, color="black", linewidth=1)
    bars.set_xscale("log", base=2)
    bars.set_yticks(list(ys))
    bars.set_yticklabels(labels, fontsize=6)
    bars.invert_yaxis()
    bars.set_xlabel("speed-up (peer time / ours)")
    bars.set_title("Every decode-suite row (*: causal Lq < Lk, where cuDNN has no bottom-right mask)", fontsize=10)
    bars.legend(fontsize=7)
    bars.grid(axis="x", alpha=0.3)
    return fig


def plot_prefill(result, plt):
    rows = [r for r in result["rows"] if not r["case"].get("kv_cache") and r["case"]["Lq"] == r["case"]["Lk"]]
    groups = {}
    for r in rows:
        c = r["case"]
        groups.setdefault((c["D"], c["dtype"], c["causal"], c["Hq"], c["Hkv"]), []).append(r)
    panels = [g for g in groups if len(groups[g]) >= 2]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.2 * max(1, len(panels)), 4.2), squeeze=False)
    for ax, g in zip(axes[0], sorted(panels)):
        series = sorted(groups[g], key=lambda r: r["case"]["Lk"])
        lk = [r["case"]["Lk"] for r in series]
        ax.plot(lk, [r["tflops"] for r in series], marker="o", label="splitkv")
        for peer, name, style in (("cudnn", "cuDNN (SDPA)", "--"), ("flash", "FlashAttention-2 (SDPA)", ":"),
                                  ("cutlass", "CUTLASS example", "-.")):
            rates = [_peer_rate(r["tflops"], r["us"], r.get("peers", {}).get(f"{peer}_us")) for r in series]
            if any(x is not None for x in rates):
                ax.plot(lk, [float("nan") if x is None else x for x in rates], style, marker=".", label=name)
        d, dtype, causal, hq, hkv = g
        ax.set_title(f"D={d} {dtype} {hq}/{hkv} {'causal' if causal else 'full'}", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Prefill on token tensors (each row's B x L held about constant)", fontsize=10)
    return fig


def plot_quant(result, plt):
    rows = result["rows"]
    formats = ["fp8", "int8", "int4", "k8v4"]
    shapes = []
    for r in rows:
        c = r["case"]
        shape = (c["B"], c["Lk"], c.get("page_size", 0))
        if shape not in shapes:
            shapes.append(shape)
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(formats)
    for i, f in enumerate(formats):
        ys = []
        for shape in shapes:
            match = [r for r in rows if (r["case"]["B"], r["case"]["Lk"], r["case"].get("page_size", 0)) == shape
                     and r["case"]["kv_format"] == f and r["case"].get("kv_layout", "token-major") == "token-major"]
            ys.append(match[0]["speedup_vs_16bit"] if match and match[0].get("speedup_vs_16bit") else 0.0)
        xs = [x + (i - (len(formats) - 1) / 2) * width for x in range(len(shapes))]
        bars = ax.bar(xs, ys, width=width, label=f)
        bound = BYTES_PER_TOKEN_D128["bf16"] / BYTES_PER_TOKEN_D128[f]
        ax.hlines(bound, xs[0] - width / 2, xs[-1] + width / 2, colors=bars.patches[0].get_facecolor(),
                  linestyles="dashed", linewidth=1)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([f"B={b}\n{lk // 1024}k" + (f"\np{p}" if p else "") for b, lk, p in shapes], fontsize=7)
    ax.set_ylabel("speed-up over the bf16 cache")
    ax.set_title("Decode over quantized caches, 32/8 heads, D=128 (dashed: the byte bound, 16-bit bytes / format bytes)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def plot_variants(result, plt):
    """Each variant row's time over its baseline's and over FlexAttention's (bars: x slower than the
    baseline, markers: x faster than FlexAttention)."""
    from variants_table import label, plain
    rows = [r for r in result["rows"] if not plain(r["case"])]
    fig, ax = plt.subplots(figsize=(12, 5))
    xs = range(len(rows))
    base = [r["us"] / r["baseline_us"] if r.get("baseline_us") else 0.0 for r in rows]
    flex = [r["flex_us"] / r["us"] if r.get("flex_us") else float("nan") for r in rows]
    ax.bar(xs, base, width=0.6, label="our time / our baseline's")
    ax.plot(xs, flex, "o", color="tab:red", label="FlexAttention's time / ours")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label(r["case"]).replace(" Lk", "\nLk").replace(" window", "\nwindow") for r in rows],
                       fontsize=5, rotation=60, ha="right")
    ax.set_ylabel("ratio")
    ax.set_title(f"Attention variants ({result.get('suite')})")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


PLOTTERS = {"decode": plot_decode, "prefill": plot_prefill, "quant": plot_quant, "variants": plot_variants,
            "variants-prefill": plot_variants}


def render(json_path, out_path=None):
    """Writes the suite's plot; returns its path, or None (no plot for the suite, or no matplotlib)."""
    with open(json_path) as f:
        result = json.load(f)
    suite = result.get("suite", os.path.basename(json_path).split("-")[0])
    if suite not in PLOTTERS or not result.get("rows"):
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plot_results: matplotlib not installed, no plot for {json_path}", file=sys.stderr)
        return None
    fig = PLOTTERS[suite](result, plt)
    fig.text(0.99, 0.005, f"{result.get('gpu', '')}, {result.get('date', '')}, commit {result.get('commit', '')}",
             ha="right", va="bottom", fontsize=6, color="gray")
    fig.tight_layout()
    out_path = out_path or os.path.splitext(json_path)[0] + ".png"
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json")
    parser.add_argument("--out")
    args = parser.parse_args()
    path = render(args.json, args.out)
    if path:
        print(path)


if __name__ == "__main__":
    main()
