#!/usr/bin/env bash
# Run 90, last call (carry ["build-bis", "build-q31", "build-h2", "build-mx/base.xz"]):
#  1. Bisect of the quant suite's FP8 B=1 1k row (3% slower at HEAD than at 31f9961 on one H100)
#     inside 31f9961..ce73004: 041f0e1 (issue 51's fixes), 4890a36, 55dcb6e, ff52af0, against
#     31f9961 and HEAD (build-h2: HEAD's CI CLI), three interleaved rounds, best us; INT8 B=1 1k
#     beside it. Prediction: the step (5.49 -> 5.63) at 041f0e1.
#  2. Mixed steps (c) and (b): HEAD (b4114c0's exit placement) against 93301d8's parent
#     (build-mx/base.xz), one round each. Prediction: FP8 (c) ~612 -> ~584 us, (b) ~505 -> ~489
#     as run 90's call 2 measured with the first placement.
# Files under $OUT: bisect.tsv, mx-{base,head}-{c,b}.json.
set -uo pipefail
D=${DEADLINE:-240}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
cp build-q31/splitkv.xz build-bis/31f9961.xz; cp build-h2/splitkv.xz build-bis/head.xz
for x in build-bis/*.xz; do c=$(basename $x .xz); xz -dc $x > /tmp/bis-$c && chmod +x /tmp/bis-$c; done
for r in 1 2 3; do
  for c in 31f9961 041f0e1 4890a36 55dcb6e ff52af0 head; do
    for f in fp8 int8; do
      [ $(left) -gt 100 ] || break 3
      rm -f /tmp/row.json
      timeout 20 /tmp/bis-$c bench --kv-format $f --lk 1024 --json /tmp/row.json >/dev/null 2>&1
      us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
      printf '%s\t%s\t%s\t%s\n' "$r" "$c" "$f" "$us" >> $OUT/bisect.tsv
    done
  done
done
python3 - $OUT/bisect.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, f, us = line.split()
    if us != "nan": t[(c, f)].append(float(us))
for (c, f), v in t.items(): print(c, f, f"best {min(v):.3f}", " ".join(f"{x:.3f}" for x in v))
P
echo "bisect $SECONDS s"
xz -dc build-mx/base.xz > /tmp/mx-base && chmod +x /tmp/mx-base
for step in c b; do
  for b in base head; do
    [ $(left) -gt 25 ] || break 2
    bin=/tmp/mx-base; [ $b = head ] && bin=/tmp/bis-head
    SPLITKV_MIXED_ONLY=$step timeout 40 $bin bench --suite mixed --json $OUT/mx-$b-$step.json > /tmp/mx.txt 2>&1
    echo "== $b $step rc=$? $SECONDS s"; grep -E "mixed route|separate  " /tmp/mx.txt | cut -c1-140
  done
done
echo "done $SECONDS s"
