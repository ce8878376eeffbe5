#!/usr/bin/env bash
# Run 93 (issues 51, 55): FP8 B=1 4k, HEAD 0.970x of 31f9961 (H100). Two looks, no build.
#  1. Does another plan bring HEAD's 4k row back? q31 (31f9961, its own plan: 16 splits, combine
#     kernel) against smem (HEAD's FP8 kernels) with splits 8/12/16/24/32, merge cluster/fused at
#     16, and no L2 prefetch; four interleaved rounds, best us.
#  2. ncu source counters (SASS, per instruction: samples and stall reasons) of the decode kernel
#     on both builds, for a by-instruction comparison of where the blocks wait.
# Carry ["build-r92"]. Files under $OUT: plans.tsv, src-*.csv, src-*.ncu-rep.
# Prediction: no plan of HEAD reaches 8.12 us (the kernel is 700 cycles slower per block); the
# stall comparison puts the extra cycles at the prologue (Q/scale group wait) or the epilogue.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r92/q31-splitkv.xz > /tmp/f-q31; xz -dc build-r92/smem.xz > /tmp/f-smem; chmod +x /tmp/f-*
cfgs=("q31|" "smem|" "smem|--splits 8" "smem|--splits 12" "smem|--splits 24" "smem|--splits 32"
      "smem|--merge cluster" "smem|--merge fused" "smem|--l2-prefetch-keys 0" "q31|--merge cluster")
for r in $(seq 1 ${ROUNDS:-4}); do
  for cfg in "${cfgs[@]}"; do
    c=${cfg%%|*}; a=${cfg#*|}
    rm -f /tmp/row.json
    timeout 20 /tmp/f-$c bench --kv-format fp8 --lk 4096 $a --json /tmp/row.json >/dev/null 2>&1
    us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
    printf '%s\t%s\t%s\t%s\n' "$r" "$c" "${a:-default}" "$us" >> $OUT/plans.tsv
  done
done
python3 - $OUT/plans.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, a, us = line.rstrip("\n").split("\t")
    if us != "nan": t[(c, a)].append(float(us))
base = min(t[("q31", "default")])
for k, v in t.items(): print(f"{k[0]:5s} {k[1]:24s} best {min(v):8.3f}  x q31 {base / min(v):.3f}  all {' '.join(f'{x:.3f}' for x in v)}")
P
echo "plans $SECONDS s"
for c in q31 smem; do
  timeout 150 ncu --section SourceCounters --section WarpStateStats --section LaunchStats -k regex:'quant' -s 20 -c 1 \
    -f -o $OUT/src-$c /tmp/f-$c bench --kv-format fp8 --lk 4096 --iters 30 > /tmp/ncu-$c.log 2>&1
  echo "$c ncu rc=$?"; tail -2 /tmp/ncu-$c.log
  timeout 60 ncu -i $OUT/src-$c.ncu-rep --page source --csv --print-source sass > $OUT/src-$c.csv 2>&1
  echo "$c source rc=$? $(wc -l < $OUT/src-$c.csv) lines"; head -3 $OUT/src-$c.csv | cut -c1-400
done
echo "done $SECONDS s"
