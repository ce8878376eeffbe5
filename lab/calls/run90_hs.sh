#!/usr/bin/env bash
# Run 90 (carry ["build-hs"]): FP8's head scales read right after the PDL wait, their latency under
# the Q tile's (hoist.xz), against HEAD (head.xz); both sm_90a bf16 D=128 native + fp8. Three
# rounds. Prediction: FP8 B=1 1k 5.59 -> 5.45-5.50 us (31f9961's 5.455 read them after the Q barrier
# too, from a uniform address); the other rows level.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for b in head hoist; do xz -dc build-hs/$b.xz > /tmp/hs-$b && chmod +x /tmp/hs-$b; done
AB_TIMEOUT=20 bash scripts/ab.sh /tmp/hs-head /tmp/hs-hoist 3 -- "--kv-format fp8 --lk 1024" \
  "--kv-format fp8 --lk 4096" "-b 8 --lk 32768 --kv-format fp8" "--lk 1024" > $OUT/hs.txt 2>&1
grep -A8 "^| shape" $OUT/hs.txt; echo "done $SECONDS s"
