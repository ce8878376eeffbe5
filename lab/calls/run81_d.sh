#!/usr/bin/env bash
# Run 81, call D: build-bin/ = HEAD + the prefill_mma capped/uncapped variants versions + the
# dequant copy on one resident wave (CI config); build-ab/splitkv_pre81.xz = HEAD before them.
# (1) GPU tests of what changed; (2) the mixed suite's step (c) pre/new/new/pre; (3) prefill_mma
# with and without softcap, pre and new; (4) ncu of the two quant rows under 0.98x of 31f9961.
set -uo pipefail
D=${DEADLINE:-330}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-bin/splitkv_gpu_tests.xz > /tmp/gt && xz -dc build-bin/splitkv.xz > /tmp/new
xz -dc build-ab/splitkv_pre81.xz > /tmp/pre && xz -dc build-ab/splitkv_31f9961.xz > /tmp/old31
chmod +x /tmp/gt /tmp/new /tmp/pre /tmp/old31
F=${FILTER:-*PrefillVariants*:*ChunkedPrefill*:*MixedRoute*}
N=4; pids=()
for i in $(seq 0 $((N-1))); do
  GTEST_TOTAL_SHARDS=$N GTEST_SHARD_INDEX=$i timeout ${TEST_T:-110} /tmp/gt --gtest_filter="$F" >/tmp/gtest.$i.log 2>&1 & pids+=($!)
done
for i in $(seq 0 $((N-1))); do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/gtest.$i.log | tr '\n' ' ') last: $(grep -E '^\[ RUN' /tmp/gtest.$i.log | tail -1)"; done
cat /tmp/gtest.*.log | xz -c > $OUT/gtest-d.log.xz
grep -h -E "^\[  FAILED  \].*\(" /tmp/gtest.*.log | head -20; grep -h -A4 "Failure" /tmp/gtest.*.log | head -30
echo "gtests done $SECONDS s"
for r in pre:p1 new:n1 new:n2 pre:p2; do
  [ $(left) -lt 120 ] && { echo "no time for mixed $r"; break; }
  SPLITKV_MIXED_ONLY=c SPLITKV_COMMIT=${r%%:*} timeout 60 /tmp/${r%%:*} bench --suite mixed --json $OUT/mixed-c-${r##*:}.json >/tmp/mixed.$r.log 2>&1
  echo "mixed c $r rc=$? $SECONDS s"; grep -E "route|separate|one call" /tmp/mixed.$r.log | head -8
done
S="--mode prefill -b 1 --hq 32 --hkv 8 --lq 8192 --lk 8192 --causal --family prefill_mma --iters 20"
for c in pre new; do for cap in 0 50; do
  X=""; [ $cap -gt 0 ] && X="--softcap $cap"
  echo "mma $c cap=$cap: $(timeout 30 /tmp/$c bench $S $X 2>&1 | tail -1 | cut -c1-170)"
done; done
for c in old31 new; do
  [ $(left) -lt 30 ] && break
  for f in "int4 --lk 131072" "fp8 --lk 1024"; do
    timeout 40 ncu --metrics gpu__time_duration.sum --csv /tmp/$c bench -b 1 --kv-format $f --iters 2 >/tmp/ncu.csv 2>/dev/null
    echo "== ncu $c $f"; python3 lab/calls/ncu_summary.py /tmp/ncu.csv | grep -v fill_random | tail -6
  done
done
echo "done $SECONDS s"
