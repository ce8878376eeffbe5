#!/usr/bin/env bash
# Run 87, call E (any H100/H200; carry ["build-w2"]): decode_mma_m32 at D=64 with two warps per
# block instead of four (EXPERIMENT: decode_tile's warps; 36 KB of shared memory, five blocks per
# SM by registers instead of two), against main, sm_90a bf16 D=64 native + INT4 CLIs built here
# (build-w2/main.xz, build-w2/new.xz). From run86_c's ncu: a short window block's time is rounds x
# (prologue + slowest warp + merge); at B=64 the 512 blocks take one round instead of two, and
# each warp's 4-5 sub-tiles leave no warp idle at the barrier. Prediction: gpt-oss q_len 4 window
# 128 + sinks B=64 23.1 -> 15-18 us, B=256 70 -> 50-60; long rows (8k, q_len 4/8) within +-5%.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for b in main new; do xz -dc build-w2/$b.xz > /tmp/skv-$b && chmod +x /tmp/skv-$b; done
G="--lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192"
AB_TIMEOUT=30 bash scripts/ab.sh /tmp/skv-main /tmp/skv-new 2 -- \
  "-b 64 $G --window 128,-1 --sinks" "-b 256 $G --window 128,-1 --sinks" "-b 16 $G --window 128,-1 --sinks" \
  "-b 1 $G --window 128,-1 --sinks" "-b 16 $G" "-b 64 $G" "-b 64 $G --window 4096,-1" \
  "-b 16 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 8192" "-b 4 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 32768" \
  "-b 1 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 32768" 2>&1 | tail -13
for a in "-b 64 $G --window 128,-1 --sinks" "-b 4 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 32768"; do
  for b in main new; do /tmp/skv-$b plan $a 2>&1 | grep -E "family|splits|grid|blocks" | head -4 | tr '\n' ' '; echo; done
done
echo "done $SECONDS s"
