#!/usr/bin/env bash
# Run 85, call B (next session; any H100 or H200): a windowed sequence's keys start on a 16-key
# sub-tile edge where one split reads them all (lab/patches/run84-window-start-subtile-edge.patch;
# split_rule.hpp window_start_edge), against main's 64-key block edge. gpt-oss window 128 at 8k:
# 144 keys (9 sub-tiles) read instead of 192 (12). New: build-np8/splitkv_ws.xz, old:
# build-np5/splitkv_rb2.xz (both sm_90a bf16 D=64 native + FP8). Then the new build's GPU tests
# of decode, variants, sinks and the adversarial page-id cases.
# Prediction: window 128 + sinks rows at B >= 64 5-10% faster, B <= 16 level, plain rows level.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np5/splitkv_rb2.xz > /tmp/old && xz -dc build-np8/splitkv_ws.xz > /tmp/new && chmod +x /tmp/old /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--hq 64 --hkv 8 -d 64 --lk 8192"
while read -r r; do
  [ $SECONDS -gt 200 ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<R
-b 64 --lq 4 --causal $G --window 128,-1 --sinks
-b 256 --lq 4 --causal $G --window 128,-1 --sinks
-b 16 --lq 4 --causal $G --window 128,-1 --sinks
-b 64 --lq 1 $G --window 128,-1 --sinks
-b 256 --lq 1 $G --window 128,-1 --sinks
-b 64 --lq 1 $G --window 128,-1 --sinks --kv-format fp8
-b 64 --lq 4 --causal $G
-b 16 --lq 4 --causal $G --window 4096,-1
R
if [ -f build-np8/splitkv_gpu_tests.xz ]; then
  bash lab/calls/gpu_test_shards.sh build-np8/splitkv_gpu_tests.xz '*Variants*:*Sinks*:DecodeGpu.*:Cases/DecodeVsReference.*:*Adversarial*:*Promise*' 150
fi
echo "done $SECONDS s"
