#!/usr/bin/env bash
# Run 50, optional third GPU call: Nsight Compute (the card's own clocks) on 28/4 q_len 8 served by
# prefill_sm90_gqa64 (8 splits) and by the decode kernel, to say what limits each: duration, DRAM
# throughput, tensor-pipe activity, issue slots and warp states.
set -u
C=build-carry
M=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_issued.avg.per_cycle_active,smsp__warps_eligible.avg.per_cycle_active,smsp__warps_active.avg.per_cycle_active
for args in "--family prefill_sm90_gqa64 --splits 8" "--family prefill_sm90_gqa64 --splits 4" ""; do
  echo "== $args"
  timeout 200 ncu --clock-control none --launch-skip 4 --launch-count 2 --metrics $M \
    $C/splitkv-new bench -b 8 --hq 28 --hkv 4 --lk 8192 --lq 8 --causal --iters 2 $args 2>&1 | grep -E "prefill_sm90|decode|combine|gmma|hmma|duration|dram__|issued|eligible|warps_active" | head -24
done | tee $OUT/ncu-gqa64.txt
