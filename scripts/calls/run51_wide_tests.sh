#!/usr/bin/env bash
# Run 51, last call: the route's 65-128-row band (prefill_sm90_gqa / gqa64) on the GPU: tests,
# memcheck of the new cases, and the planned rows timed.
set -u
C=build-carry
T=$C/tests/splitkv_gpu_tests-regs
timeout 120 stdbuf -oL $T --gtest_filter='*PlannerRoute*:*prefill_route*:*via_prefill*:*BadDeviceLengths*:*ContextShards*' > $OUT/tests-wide.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-wide.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests-wide.log | head
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*wide_prefill_route*:*PlannerRoute*' --gtest_brief=1 > $OUT/memcheck-wide.log 2>&1
echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $OUT/memcheck-wide.log | tail -1)"
for s in "-b 8 --hq 28 --hkv 4 --lk 8192 --lq 16" "-b 1 --hq 28 --hkv 4 --lk 32768 --lq 16" "-b 8 --hq 64 --hkv 8 --lk 8192 --lq 16"; do
  echo "planned $s: $(timeout 60 $C/splitkv-regs bench $s --causal 2>&1 | tail -1)"
done
