#!/usr/bin/env bash
# Run 84, call C: the variants instance's register-bound twin, launched where it saves a round of
# blocks (Plan::register_bound_blocks), against main (build-np2/splitkv_w.xz, wide config, the
# unbound instance) on the gpt-oss rows: B=128 and 256 q_len 4 take the twin (4 -> 3 and 8 -> 6
# rounds; window 4096 at B=16 and 64: 3 splits, 2 -> 1 and 6 -> 4 rounds), B=1/16/64 keep the plain instance, q_len 1 and the plain rows are other instances.
# New: build-np4/splitkv_rb.xz (D=64 bf16, sm_90a). Then its variants and sinks GPU tests.
# Prediction: B=256 86.5 -> ~72.5 us (call A's bound build), B=128 ~-15%, the rest level.
set -uo pipefail
D=${DEADLINE:-170}
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np2/splitkv_w.xz > /tmp/old && xz -dc build-np4/splitkv_rb.xz > /tmp/new && chmod +x /tmp/old /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--causal --hq 64 --hkv 8 -d 64 --lk 8192"
while read -r r; do
  [ $SECONDS -gt $D ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<R
-b 256 --lq 4 $G --window 128,-1 --sinks
-b 128 --lq 4 $G --window 128,-1 --sinks
-b 64 --lq 4 $G --window 128,-1 --sinks
-b 16 --lq 4 $G --window 128,-1 --sinks
-b 1 --lq 4 $G --window 128,-1 --sinks
-b 256 --lq 4 $G --window 4096,-1 --sinks
-b 16 --lq 4 $G --window 4096,-1
-b 64 --lq 4 $G --window 4096,-1
-b 256 --lq 4 $G
-b 64 --lq 4 $G
-b 256 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 256 --lq 4 $G --window 128,-1 --softcap 30
R
/tmp/new plan -b 256 --lq 4 $G --window 128,-1 --sinks | grep -E "tile|splits"
/tmp/new plan -b 64 --lq 4 $G --window 128,-1 --sinks | grep -E "tile|splits"
if [ -f build-np4/splitkv_gpu_tests.xz ]; then
  bash lab/calls/gpu_test_shards.sh build-np4/splitkv_gpu_tests.xz '*Variants*:*Sinks*' 150
fi
# The window + sinks kernel under ncu (run84_b.sh's question: where a B=64 call's ~25 us go when
# its 17 MB of reads take ~5 us): the kernel alone, occupancy and stall reasons.
if [ $SECONDS -lt 300 ]; then
  M=gpu__time_duration.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  M=$M,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__registers_per_thread
  for bin in old new; do for b in 64 256; do
    echo "== ncu $bin B=$b"
    timeout 40 ncu --kernel-name regex:decode_kernel -c 2 --metrics $M --csv /tmp/$bin bench -b $b --lq 4 $G --window 128,-1 --sinks \
      --iters 2 2>/dev/null | awk -F'","' 'NR>1{print $(NF-2) " " $NF}' | tr -d '"' | tail -6
  done; done
  timeout 60 ncu --kernel-name regex:decode_kernel -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section LaunchStats --section SchedulerStats /tmp/old bench -b 64 --lq 4 $G --window 128,-1 --sinks --iters 2 > $OUT/ncu-b64-old.txt 2>&1
  grep -E "Duration|Achieved Occupancy|Stall|Warp Cycles Per Issued|Eligible|Issued Warp|Block Limit" $OUT/ncu-b64-old.txt | head -24
fi
echo "done $SECONDS s"
