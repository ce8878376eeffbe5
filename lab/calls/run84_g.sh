#!/usr/bin/env bash
# Run 84, call G: how the gpt-oss window 128 + sinks q_len 4 row scales with the batch (HEAD's D=64
# CLI, build-np5/splitkv_rb2.xz). ncu (call C) found the B=64 kernel latency-bound (0.41 eligible
# warps per scheduler, 12% occupancy, DRAM 26%), ~12 us per round of blocks where B=16's single
# round takes ~7.5 us a call. If time grows by rounds, B=32 (256 blocks: one round of two) should
# cost about B=16; if it grows with the blocks per SM, the blocks slow each other (the memory
# system, not the rounds). Then the layout and the variant at B=64: head-major, paged, no sinks,
# no window (4096), q_len 1.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np5/splitkv_rb2.xz > /tmp/new && chmod +x /tmp/new
t() { timeout 20 /tmp/new bench $1 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192"
for b in 8 16 24 32 40 48 56 64 80 96 128; do echo "B=$b $(t "-b $b $G --window 128,-1 --sinks")"; done
echo "B=64 head-major $(t "-b 64 $G --window 128,-1 --sinks --kv-head-major")"
echo "B=64 paged16 $(t "-b 64 $G --window 128,-1 --sinks --page-size 16")"
echo "B=64 window only $(t "-b 64 $G --window 128,-1")"
echo "B=64 lk 1024 window 128 $(t "-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 1024 --window 128,-1 --sinks")"
echo "B=64 lk 256 no window $(t "-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 256")"
echo "B=64 q1 $(t "-b 64 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks")"
echo "done $SECONDS s"
