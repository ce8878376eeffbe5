#!/usr/bin/env bash
# Run 51: what limits the routed speculative row (B=8 28/4 q_len 8 causal, 8k) at 70% of the
# ceiling: per-kernel durations of one call (memset, prefill_sm90 gqa64, combine) and the gqa64
# kernel's sections; the decode kernel's 28/4 q_len 4 row for comparison.
set -u
B=build-carry/splitkv
S="-b 8 --hq 28 --hkv 4 --lk 8192 --lq 8 --causal --iters 1"
timeout 120 ncu --clock-control none --kernel-name 'regex:prefill|combine|decode' --launch-count 6 \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active \
  $B bench $S > $OUT/ncu-durations.txt 2>&1
grep -E '^  [a-z_]+.*\(|gpu__time|dram__|grid_size|warps_active' $OUT/ncu-durations.txt | head -60
timeout 150 ncu --clock-control none --kernel-name 'regex:prefill' --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
  $B bench $S > $OUT/ncu-gqa64.txt 2>&1
grep -E 'Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Stall|Achieved Occupancy|Registers|gmma|Waves|L2 Hit|Warp Cycles Per Issued|Issue Slot' $OUT/ncu-gqa64.txt | head -40
timeout 100 ncu --clock-control none --kernel-name 'regex:decode|combine' --launch-count 4 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $B bench -b 8 --hq 28 --hkv 4 --lk 8192 --lq 4 --causal --iters 1 > $OUT/ncu-decode-q4.txt 2>&1
grep -E '^  [a-z_]+.*\(|gpu__time|dram__' $OUT/ncu-decode-q4.txt | head -20
