#!/usr/bin/env bash
# Run 92 (issue 54): the persistent prefill grid passes over a sequence without query rows in one
# step (TileSchedule::next_tile_past_sequence) instead of claiming and resolving each of its tiles
# (the mixed route's prefill part walked 15360 empty tiles on step (b): its serial route ran 112 us
# over the separate calls, and side by side those tiles hold 99 SMs the decode part cannot use).
# Carry ["build-r92"]: mixed.xz (before), skip.xz (after; sm_90a bf16 D=128 native;fp8;int8 CLI
# for mixed.xz, native;fp8 for skip.xz), gts.xz (after: GPU tests).
# Prediction: route side by side (b) bf16 742 -> ~700-720 us (>= separate 738), FP8 (b) 497 ->
# ~460, (c) level or better; serial (b) 850 -> ~745; prefill rows without empty sequences level.
# Files under $OUT: mixed-skip.json, mixed-skip.log, prefill.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-r92/gts.xz '*Prefill*:*Chunk*:Mixes/*:MixedRoute*:*Zero*:*Varlen*' 110
xz -dc build-r92/skip.xz > /tmp/f-skip; xz -dc build-r92/mixed.xz > /tmp/f-base; chmod +x /tmp/f-*
SPLITKV_MIXED_ONLY=${MIXED_ONLY:-bce} SPLITKV_COMMIT=${COMMIT:-skip} timeout 100 /tmp/f-skip bench --suite mixed --json $OUT/mixed-skip.json > $OUT/mixed-skip.log 2>&1
echo "mixed rc=$? $SECONDS s"
grep -E "route|separate" $OUT/mixed-skip.log | cut -c1-110
for r in $(seq 1 ${ROUNDS:-1}); do
  for c in base skip; do
    for a in "-b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 --causal" "-b 4 --hq 32 --hkv 8 --lq 4096 --lk 4096 --causal"; do
      us=$(timeout 60 /tmp/f-$c bench --mode prefill $a -d 128 --dtype bf16 --iters 30 --json /tmp/p.json >/dev/null 2>&1 && python3 -c 'import json; print(json.load(open("/tmp/p.json"))["rows"][0]["us"])' || echo nan)
      printf '%s\t%s\t%s\t%s\n' "$r" "$c" "$a" "$us" | tee -a $OUT/prefill.tsv
    done
  done
done
echo "done $SECONDS s"
