#!/usr/bin/env bash
# Planned in run 90 for the next session (carry ["build-q31", "build-q31x", "build-bis/041f0e1.xz",
# "build-h2"]): which part of 041f0e1 (issue 51's fixes) costs the quant suite's FP8 B=1 1k row
# its 0.14-0.18 us (31f9961 5.455 us, 041f0e1 5.638, HEAD 5.590 on one H100, run 90). CLIs, all
# sm_90a bf16 D=128: 31f9961 (build-q31), 31f9961 + the FP8 head scales read through their stride
# (build-q31x/stride.xz), 31f9961 + an empty partial's O zeroed in fold_chunk (build-q31x/guard.xz;
# the cluster merge of this row folds through it), 041f0e1 (native + fp8 only), HEAD (build-h2, the
# CI CLI of c8d2daa). Five interleaved rounds, best us; INT8 B=1 1k beside FP8 where built.
# Prediction: the stride carries most of it (INT8, which reads no head scale, lost 0.6%).
# Files under $OUT: fp8.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-q31/splitkv.xz > /tmp/f-q31; xz -dc build-q31x/stride.xz > /tmp/f-stride
xz -dc build-q31x/guard.xz > /tmp/f-guard; xz -dc build-bis/041f0e1.xz > /tmp/f-041; xz -dc build-h2/splitkv.xz > /tmp/f-head
chmod +x /tmp/f-*
for r in 1 2 3 4 5; do
  for c in q31 stride guard 041 head; do
    for f in fp8 int8; do
      [ $c = 041 ] && [ $f = int8 ] && continue
      rm -f /tmp/row.json
      timeout 20 /tmp/f-$c bench --kv-format $f --lk 1024 --json /tmp/row.json >/dev/null 2>&1
      us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
      printf '%s\t%s\t%s\t%s\n' "$r" "$c" "$f" "$us" >> $OUT/fp8.tsv
    done
  done
done
python3 - $OUT/fp8.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, f, us = line.split()
    if us != "nan": t[(c, f)].append(float(us))
for (c, f), v in t.items(): print(c, f, f"best {min(v):.3f}", " ".join(f"{x:.3f}" for x in v))
P
echo "done $SECONDS s"
