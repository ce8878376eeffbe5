#!/usr/bin/env bash
# Planned in run 91 (issues 51 and 55: the quant suite's last row under 0.98x of the rebuilt
# 31f9961 is FP8 B=1 4k, 0.971-0.978x on three H100 runs; HEAD before the staged scales 0.976-0.981x).
# Carry ["build-q31", "build-q31x", "build-bis", "build-r91"] (~48 MB). CLIs (sm_90a bf16 D=128):
# q31 = 31f9961; stride / guard = 31f9961 + one of 041f0e1's two FP8-path changes; 041f0e1,
# 4890a36, 55dcb6e, ff52af0 (run 90's bisect points, native + fp8); head = HEAD before the staged
# scales (c751cc5's sources); smem = the staged scales (7e3a28f, HEAD's FP8 kernels); pf = smem +
# FP8's two scale lines prefetched into L2 before the PDL wait
# (lab/patches/run91-fp8-scales-l2-prefetch.patch: n8 registers unchanged, 156/154/156).
# Five interleaved rounds, best us, FP8 B=1 1k and 4k (4k: 16 splits and the combine kernel; 1k:
# 8 splits merged in a cluster).
# Prediction: the 4k step lies at 041f0e1 (the stride) like 1k's; pf takes 4k to <= 8.28 us
# (0.98x of 31f9961's ~8.12) by making the staged Q group wait on L2, not DRAM, for the scales;
# 1k stays ~5.40-5.46.
# Files under $OUT: fp8.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-q31/splitkv.xz > /tmp/f-q31
for c in stride guard; do xz -dc build-q31x/$c.xz > /tmp/f-$c; done
for c in 041f0e1 4890a36 55dcb6e ff52af0; do xz -dc build-bis/$c.xz > /tmp/f-$c; done
for c in head smem pf; do xz -dc build-r91/$c.xz > /tmp/f-$c; done
chmod +x /tmp/f-*
bins=${BINS:-"q31 stride guard 041f0e1 4890a36 55dcb6e ff52af0 head smem pf"}
for r in $(seq 1 ${ROUNDS:-5}); do
  for c in $bins; do
    for row in ${ROWS:-1024:1 4096:1}; do
      lk=${row%:*}; b=${row#*:}
      rm -f /tmp/row.json
      timeout 20 /tmp/f-$c bench --kv-format fp8 --lk $lk -b $b --json /tmp/row.json >/dev/null 2>&1
      us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
      printf '%s\t%s\tfp8-%s-b%s\t%s\n' "$r" "$c" "$lk" "$b" "$us" >> $OUT/fp8.tsv
    done
  done
done
python3 - $OUT/fp8.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, f, us = line.split()
    if us != "nan": t[(f, c)].append(float(us))
order = "q31 stride guard 041f0e1 4890a36 55dcb6e ff52af0 head smem pf".split()
for f in sorted({f for f, _ in t}):
    base = min(t[(f, "q31")]) if t.get((f, "q31")) else None
    for c in order:
        v = t.get((f, c))
        if v: print(f, c, f"best {min(v):.3f}", f"x31f9961 {base / min(v):.3f}" if base else "", " ".join(f"{x:.3f}" for x in v))
P
echo "done $SECONDS s"
