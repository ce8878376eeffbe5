#!/usr/bin/env bash
# Run 94 (issue 54), call A: the mixed route with two prefill-part changes (HEAD 854d7b5 +
# lab/patches/run93-sequence-scan.patch + lab/patches/run93-route-active-blocks.patch):
#  - the scan: a persistent prefill block that meets a sequence without rows moves to the first tile
#    of the next sequence with rows (a warp ballot over 32 sequences a step);
#  - active blocks: the route's persistent prefill grid is launched whole; the split kernel's first
#    block writes how many blocks walk the tiles (99 of 132 where the step has decode rows, all of
#    them on a step of chunks alone), the others exit at once.
# Carry ["build-r93"]: gt-both.xz (GPU tests), both.xz (CLI, sm_90a bf16 D=128 native;fp8;int8).
# GPU tests of prefill, chunks, the route (two new mixes: chunks only; 70 rows ahead of a chunk),
# zero-length, varlen, the work-list builder; memcheck over the route's mixes; the mixed suite's
# steps a, b, e and an ncu kernel list of step b.
# Prediction (H100, against run 93's skip build): route side by side (b) bf16 724 -> ~700 us, FP8
# 474 -> ~445; serial (b) 841 -> ~720; chunks only (e) side by side 534 -> ~445 (the one call 435);
# (a) level (1675); under ncu the route's prefill part on (b) 195 -> ~80 us.
# Files under $OUT: mixed-both.json, mixed-both.log, ncu-b.txt.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-r93/gt-both.xz '*Prefill*:*Chunk*:Mixes/*:MixedRoute*:*Zero*:*Varlen*:MixedWork*-*PrefillVariants*' 150
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt --gtest_filter='Mixes/MixedRoute*:MixedRouteHostile.*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | head
echo "tests $SECONDS s"
xz -dc build-r93/both.xz > /tmp/cli; chmod +x /tmp/cli
SPLITKV_MIXED_ONLY=abe SPLITKV_COMMIT=${COMMIT:-both} timeout 200 /tmp/cli bench --suite mixed --json $OUT/mixed-both.json > $OUT/mixed-both.log 2>&1
echo "mixed rc=$? $SECONDS s"
grep -E "route|separate|mixed  " $OUT/mixed-both.log | cut -c1-130
SPLITKV_MIXED_ONLY=b timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum --csv /tmp/cli bench --suite mixed --iters 1 >/tmp/ncu.csv 2>/dev/null
python3 lab/calls/ncu_summary.py /tmp/ncu.csv > $OUT/ncu-b.txt; grep -E "\(99|\(132" $OUT/ncu-b.txt | sort | uniq -c | sort -rn | head -8
echo "done $SECONDS s"
