#!/usr/bin/env bash
# Run 84, call B: the gpt-oss window 128 + sinks q_len 4 decode rows' kernel under ncu, unbounded
# (build-np2/splitkv_w.xz, two blocks per SM by registers) and register-bound for three
# (build-np3/splitkv_lb.xz). Call A measured B=64 24.95 -> 26.14 us and B=256 86.5 -> 72.4 us:
# at B=64 (512 blocks, 3.9 per SM) both take two rounds of blocks, at B=256 (15.5 per SM) eight
# against six. Here: the kernel's own time, achieved occupancy and stall reasons, to see where a
# B=64 call's ~25 us go when its 17 MB of reads take ~5 us.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np2/splitkv_w.xz > /tmp/old && xz -dc build-np3/splitkv_lb.xz > /tmp/new && chmod +x /tmp/old /tmp/new
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__registers_per_thread
for bin in old new; do
  for b in 16 64 256; do
    a="-b $b --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks"
    echo "== $bin B=$b"
    timeout 60 ncu --kernel-name regex:decode_kernel -c 2 --metrics $M --csv /tmp/$bin bench $a --iters 2 2>/dev/null \
      | awk -F'","' 'NR>1{print $(NF-2) " " $NF}' | tr -d '"' | tail -12
  done
done
a="-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks"
timeout 90 ncu --kernel-name regex:decode_kernel -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
  --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis /tmp/old bench $a --iters 2 > $OUT/ncu-b64-old.txt 2>&1
echo "full rc=$?"; grep -E "Duration|Achieved Occupancy|Stall|Warp Cycles|Eligible|Issued Warp|Registers|Block Limit" $OUT/ncu-b64-old.txt | head -30
# the timeline of one call: the bench's graph under nsys is not available; time the window row at
# --iters 30 for the record of this card
for b in 64 256; do
  a="-b $b --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks"
  echo "B=$b old $(timeout 20 /tmp/old bench $a --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}') new $(timeout 20 /tmp/new bench $a --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}')"
done
echo "done $SECONDS s"
