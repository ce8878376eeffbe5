#!/usr/bin/env bash
# Run 80, call P: the two run-79 patches (mixed route's tile skip, dequant grid cap) built on the
# CPU machine into build-binp/ (CI config), main's into build-bin/. The prefill, chunked and mixed
# GPU tests on the patched build, then the mixed suite patched and main. <= 8 files under $OUT.
set -uo pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-binp/splitkv_gpu_tests.xz > /tmp/gt_p && xz -dc build-binp/splitkv.xz > /tmp/cli_p
xz -dc build-bin/splitkv.xz > /tmp/cli_m && chmod +x /tmp/gt_p /tmp/cli_p /tmp/cli_m
export SPLITKV_COMMIT=${C:-run80}
F=${FILTER:-*Prefill*:*MixedRoute*:*Dequant*:*Variants*}
pids=()
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TEST_T:-150} /tmp/gt_p --gtest_filter="$F" >/tmp/gtest.$i.log 2>&1 & pids+=($!)
done
for i in 0 1 2 3; do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/gtest.$i.log | tr '\n' ' ') last: $(grep -E '^\[ RUN' /tmp/gtest.$i.log | tail -1)"; done
cat /tmp/gtest.*.log > $OUT/gtest-p.log
grep -h -E "^\[  FAILED  \].*\(" $OUT/gtest-p.log | head -20; grep -h -A4 "Failure" $OUT/gtest-p.log | head -40
grep -h "300_short" $OUT/gtest-p.log | head -3
echo "gtests done $SECONDS s"
for s in p m; do
  timeout ${MIXED_T:-120} /tmp/cli_$s bench --suite mixed --json $OUT/mixed-$s.json >/tmp/mixed-$s.log 2>&1; echo "mixed $s rc=$? $SECONDS s"
  grep -v "^ *$" /tmp/mixed-$s.log | tail -16
done
cat /tmp/mixed-p.log /tmp/mixed-m.log > $OUT/mixed.log
echo "done $SECONDS s"
