#!/usr/bin/env bash
# Run 91: the staged FP8 scales (landed, build-r91/smem.xz) against the same with V's scale read
# after the key loop (late.xz: no register holds it across the loop; n8 registers 156 -> 155,
# 16-row 195/203/217 -> 194/202/213), 31f9961 (build-q31) and HEAD before the staging (head.xz).
# Prediction: late wins back part of B=1 4k's 0.9% (8.39 -> 8.33) and keeps 1k at ~5.46.
# Carry ["build-q31", "build-r91"]. Files under $OUT: late.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for c in head smem late; do xz -dc build-r91/$c.xz > /tmp/f-$c; done
xz -dc build-q31/splitkv.xz > /tmp/f-q31; chmod +x /tmp/f-*
for r in 1 2 3 4 5; do
  for c in q31 head smem late; do
    for a in "fp8 1024 1" "fp8 4096 1" "fp8 16384 1" "fp8 4096 8" "fp8 4096 32"; do
      set -- $a; rm -f /tmp/row.json
      timeout 20 /tmp/f-$c bench --kv-format $1 --lk $2 -b $3 --json /tmp/row.json >/dev/null 2>&1
      us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
      printf '%s\t%s\t%s-%s-b%s\t%s\n' "$r" "$c" "$1" "$2" "$3" "$us" >> $OUT/late.tsv
    done
  done
done
python3 - $OUT/late.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, f, us = line.split()
    if us != "nan": t[(f, c)].append(float(us))
for (f, c), v in sorted(t.items()): print(f, c, f"best {min(v):.3f}", " ".join(f"{x:.3f}" for x in v))
P
echo "done $SECONDS s"
