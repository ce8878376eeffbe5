#!/usr/bin/env bash
# Run 89, the mixed route's compacted slots (carry ["build-mx/base.xz", "build-mx/new.xz"]): the
# mixed suite's steps (c) and (b), base / new / base / new (the same tree, HEAD's CI configuration,
# without and with the change). Prediction (from run 81's ncu of step (c): the speculative part's
# kernel 258 us in the route against 192 alone on FP8, 400 against 363 on bf16, its 256 real
# blocks queued behind 2048 empty ones): FP8 (c) route 617 -> 555-575 us, bf16 (c) 1080 ->
# 1040-1060; (b) within +-2% (its decode rows come first in the batch already).
# Files under $OUT: mx-{base,new}{1,2}-{c,b}.json (8).
set -uo pipefail
D=${DEADLINE:-540}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in base new; do xz -dc build-mx/$b.xz > /tmp/mx-$b && chmod +x /tmp/mx-$b; done
for step in c b; do
  for r in 1 2; do
    for b in base new; do
      [ $(left) -gt 40 ] || break 3
      SPLITKV_MIXED_ONLY=$step timeout $(( $(left) - 10 )) /tmp/mx-$b bench --suite mixed \
        --json $OUT/mx-$b$r-$step.json > /tmp/mx-$b$r-$step.txt 2>&1
      echo "== $b $r $step rc=$? $SECONDS s"; grep -E "mixed route|separate  " /tmp/mx-$b$r-$step.txt | cut -c1-140
    done
  done
done
echo "done $SECONDS s"
