#!/usr/bin/env bash
# Run 82's patch call (for the next session): two ideas for the D=64 speculative rows that run
# 1.29 waves of blocks (B=64 64/8 q_len 4 8k: 512 blocks on 396 slots):
#  tail: lab/patches/run82-tail-wave-splits.patch (split such grids), CLIs build-np/splitkv.xz
#        (wide config) and build-np/splitkv_ci.xz (CI config);
#  s3:   lab/patches/run82-decode-d64-three-stages.patch (3 stages at D=64: 4 blocks per SM, one
#        wave), CLI build-np/splitkv_s3.xz (wide config).
# Against main's build-ab/splitkv_wide.xz (and build-bin/splitkv.xz for the CI-config rows),
# interleaved old/tail/s3/s3/tail/old. Land what gains everywhere; with both, s3 first (no combine).
set -uo pipefail
D=${DEADLINE:-240}
xz -dc build-ab/splitkv_wide.xz > /tmp/old && xz -dc build-np/splitkv.xz > /tmp/tail && xz -dc build-np/splitkv_s3.xz > /tmp/s3
xz -dc build-bin/splitkv.xz > /tmp/oldci && xz -dc build-np/splitkv_ci.xz > /tmp/tailci
chmod +x /tmp/old /tmp/tail /tmp/s3 /tmp/oldci /tmp/tailci
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-5), $(NF-3), $(NF-1)}'; }
while read -r r; do
  [ $SECONDS -gt $D ] && break
  echo "$(for c in old tail s3 s3 tail old; do echo -n "$c $(t $c "$r") | "; done) [$r]"
done <<'R'
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 256 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 16 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 1 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 64 --lq 2 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 32 --lq 16 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 4096
-b 64 --hq 32 --hkv 8 -d 64 --lk 8192 --kv-format fp8
R
while read -r r; do
  [ $SECONDS -gt $D ] && break
  echo "$(for c in oldci tailci tailci oldci; do echo -n "$c $(t $c "$r") | "; done) [$r]"
done <<'R'
-b 64 --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4
-b 16 --lq 16 --causal --hq 28 --hkv 4 -d 128 --lk 8192 --kv-format fp8
R
if [ -f build-np/splitkv_gpu_tests_d64s3.xz ] && [ $SECONDS -lt $((D + 60)) ]; then
  xz -dc build-np/splitkv_gpu_tests_d64s3.xz > /tmp/gt && chmod +x /tmp/gt
  pids=()
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 120 /tmp/gt --gtest_filter='*Decode*:*Variants*:*Sinks*' >/tmp/g.$i.log 2>&1 & pids+=($!)
  done
  for i in 0 1 2 3; do wait ${pids[$i]}; echo "d64 s3 shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/g.$i.log | tr '\n' ' ')"; done
  grep -h -E '^\[  FAILED  \].*\(' /tmp/g.*.log | head
fi
echo "done $SECONDS s"
