#!/usr/bin/env bash
# Run 80, call D: build-binp/ = main + the route's tile skip, the dequant work list (one load in
# flight per thread, as in call B), the route's vector copies and early exit, the page producers' fast division,
# one CodeKind (CI config); build-bin/ = main. GPU tests of what changed, the mixed suite new and
# main, then the prefill suite (CI config rows: bf16 D=128) main/new/new/main. <= 8 files.
set -uo pipefail
D=${DEADLINE:-560}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-binp/splitkv_gpu_tests.xz > /tmp/gt && xz -dc build-binp/splitkv.xz > /tmp/cli_new
xz -dc build-bin/splitkv.xz > /tmp/cli_main && chmod +x /tmp/gt /tmp/cli_new /tmp/cli_main
export SPLITKV_COMMIT=${C:-run80}
F=${FILTER:-*ChunkedPrefill*:*Kc*:*MixedRoute*}
N=6; pids=()
for i in $(seq 0 $((N-1))); do
  GTEST_TOTAL_SHARDS=$N GTEST_SHARD_INDEX=$i timeout ${TEST_T:-90} /tmp/gt --gtest_filter="$F" >/tmp/gtest.$i.log 2>&1 & pids+=($!)
done
for i in $(seq 0 $((N-1))); do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/gtest.$i.log | tr '\n' ' ') last: $(grep -E '^\[ RUN' /tmp/gtest.$i.log | tail -1)"; done
cat /tmp/gtest.*.log > $OUT/gtest-d.log
grep -h -E "^\[  FAILED  \].*\(" $OUT/gtest-d.log | head -20; grep -h -A4 "Failure" $OUT/gtest-d.log | head -40
echo "gtests done $SECONDS s"
for s in new; do
  timeout ${MIXED_T:-110} /tmp/cli_$s bench --suite mixed --json $OUT/mixed-$s.json >/tmp/mixed-$s.log 2>&1; echo "mixed $s rc=$? $SECONDS s"
  grep -E "route|separate  |mixed  " /tmp/mixed-$s.log
done
for r in main:m1 new:n1 new:n2 main:m2; do
  T=$(( $(left) - 5 )); [ $T -lt 30 ] && { echo "no time for $r"; break; }
  SPLITKV_COMMIT=${r%%:*} timeout $T /tmp/cli_${r%%:*} bench --suite prefill --json $OUT/prefill-${r##*:}.json >>/tmp/prefill.log 2>&1
  echo "prefill $r rc=$? $SECONDS s"
done
cp /tmp/prefill.log $OUT/prefill.log
echo "done $SECONDS s"
