#!/usr/bin/env bash
# Run 84, call D: the twin rule as landed (short blocks or one round; build-np5/splitkv_rb2.xz)
# against main (build-np2/splitkv_w.xz) on the rows call C measured either way, then the D=64 GPU
# tests of the decode, variants and sinks paths (D=128 cases skip in this D=64 build now that
# compiled_head_dims counts attention kernels only).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np2/splitkv_w.xz > /tmp/old && xz -dc build-np5/splitkv_rb2.xz > /tmp/new && chmod +x /tmp/old /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--causal --hq 64 --hkv 8 -d 64 --lk 8192"
while read -r r; do
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<R
-b 256 --lq 4 $G --window 128,-1 --sinks
-b 16 --lq 4 $G --window 4096,-1
-b 64 --lq 4 $G --window 4096,-1
-b 256 --lq 4 $G --window 4096,-1 --sinks
R
bash lab/calls/gpu_test_shards.sh build-np5/splitkv_gpu_tests.xz '*Variants*:*Sinks*:DecodeGpu.*:Cases/DecodeVsReference.*' 150
echo "done $SECONDS s"
