#!/usr/bin/env bash
# Run 91, issue 55's speed guard: are the quant suite's rows under 0.98x of the rebuilt 31f9961 in
# call 5 (FP8 B=1 4k 0.978, INT4 B=1 64k 0.971, 128k bimodal) real, and where is the time?
# Carry ["build-q31", "build-r91", "build-h2"]: 31f9961, HEAD + staged FP8 scales (smemfull), HEAD
# before it (build-h2, CI CLI of c8d2daa; its INT4 kernels' SASS equals smemfull's).
#  1. Five interleaved rounds (best us) of the suite's rows at CLI defaults.
#  2. ncu (kernel durations, base clocks) of INT4 B=1 64k and FP8 B=1 4k per binary: decode kernel
#     against combine.
# Prediction: INT4 64k q31 vs new within 1.5% (call 5's 2.9% partly this card's spread); if not,
# ncu places it in the combine (33 splits; the combine's row guards since 31f9961).
# Files under $OUT: i4.tsv, ncu.txt.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-q31/splitkv.xz > /tmp/f-q31; xz -dc build-r91/smemfull.xz > /tmp/f-new; xz -dc build-h2/splitkv.xz > /tmp/f-h2
chmod +x /tmp/f-*
for r in 1 2 3 4 5; do
  for c in q31 h2 new; do
    for a in "int4 65536 1" "int4 16384 1" "fp8 4096 1" "int4 131072 1" "k8v4 65536 1"; do
      set -- $a; rm -f /tmp/row.json
      timeout 30 /tmp/f-$c bench --kv-format $1 --lk $2 -b $3 --json /tmp/row.json >/dev/null 2>&1
      us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
      printf '%s\t%s\t%s-%s-b%s\t%s\n' "$r" "$c" "$1" "$2" "$3" "$us" >> $OUT/i4.tsv
    done
  done
done
python3 - $OUT/i4.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, f, us = line.split()
    if us != "nan": t[(f, c)].append(float(us))
for (f, c), v in sorted(t.items()): print(f, c, f"best {min(v):.3f}", " ".join(f"{x:.3f}" for x in v))
P
echo "timing $SECONDS s"
for c in q31 new; do
  for a in "int4 65536" "fp8 4096"; do
    set -- $a
    echo "== $c $1 $2" >> $OUT/ncu.txt
    timeout 90 ncu --metrics gpu__time_duration.sum -s 20 -c 6 /tmp/f-$c bench --kv-format $1 --lk $2 --iters 30 2>&1 \
      | grep -E "splitkv::|gpu__time_duration" | sed -E 's/splitkv::detail:://g' | cut -c1-140 >> $OUT/ncu.txt
  done
done
cat $OUT/ncu.txt | head -60
echo "done $SECONDS s"
