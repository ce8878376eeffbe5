#!/usr/bin/env bash
# Run 93 (issue 54): the persistent prefill grid finds the next sequence with query rows by a warp
# ballot over 32 sequences a step (TileSchedule::next_tile_past_sequence). Under ncu the route's
# prefill part on step (b) took 195 us (99 blocks) against the chunks' own call's 67 us on 132:
# with the decode rows first, every block still stepped once per skipped sequence (120 rounds of
# claim + resolve). Carry ["build-r92"]: gtw.xz (GPU tests), scan.xz (CLI), both HEAD + the scan.
# Prediction: the route's prefill part ~195 -> ~80 us under ncu; route side by side (b) bf16
# 724 -> ~710 us (the decode part, 662 us, dominates), serial (b) 841 -> ~720, FP8 serial 562 -> ~450.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-r92/gtw.xz '*Prefill*:*Chunk*:Mixes/*:MixedRoute*:*Zero*:*Varlen*:MixedWork*-*PrefillVariants*' 150
xz -dc build-r92/scan.xz > /tmp/cli; chmod +x /tmp/cli
SPLITKV_MIXED_ONLY=be SPLITKV_COMMIT=${COMMIT:-scan} timeout 120 /tmp/cli bench --suite mixed --json $OUT/mixed-scan.json > $OUT/mixed-scan.log 2>&1
echo "mixed rc=$? $SECONDS s"
grep -E "route|separate" $OUT/mixed-scan.log | cut -c1-140
