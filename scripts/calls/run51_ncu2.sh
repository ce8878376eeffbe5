#!/usr/bin/env bash
# Run 51: the routed row's gqa64 kernel at 8k and 32k (fixed cost vs per-step rate) with the stall
# reasons per issued instruction, and the decode kernels on the same heads at q_len 1.
set -u
B=build-carry/splitkv
M='gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for lk in 8192 32768; do
  timeout 120 ncu --clock-control none --kernel-name 'regex:prefill' --launch-count 1 --metrics "$M" \
    $B bench -b 8 --hq 28 --hkv 4 --lk $lk --lq 8 --causal --iters 1 > $OUT/ncu-stalls-$lk.txt 2>&1
  echo "== gqa64 28/4 q_len 8 lk $lk"
  grep -E 'gpu__time|dram__|stalled' $OUT/ncu-stalls-$lk.txt | awk '$NF+0 > 0.05 || /time|dram/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
done
timeout 60 ncu --clock-control none --kernel-name 'regex:decode|combine' --launch-count 2 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $B bench -b 8 --hq 28 --hkv 4 --lk 8192 --iters 1 > $OUT/ncu-q1.txt 2>&1
echo "== decode 28/4 q_len 1 8k"; grep -E '^  [a-z_]+.*\(|gpu__time|dram__' $OUT/ncu-q1.txt | cut -c1-120
for lq in 1 8; do echo "bench 28/4 q_len $lq 8k: $(timeout 60 $B bench -b 8 --hq 28 --hkv 4 --lk 8192 --lq $lq --causal 2>&1 | tail -1)"; done
