#!/usr/bin/env bash
# Planned in run 91 (issue 54): the GPU work-list builder's tests, never run on a GPU yet
# (carry ["build-r91/gt2.xz"]: HEAD's GPU tests at sm_90a bf16 D=128 native + fp8, built with
# the mixed_work family). Then the same under compute-sanitizer memcheck (the overflow case must
# write nothing past the capacity).
# Prediction: 3 tests pass, 0 memcheck errors.
set -uo pipefail
xz -dc build-r91/gt2.xz > /tmp/gt2 && chmod +x /tmp/gt2
timeout 120 /tmp/gt2 --gtest_filter='MixedWorkGpu.*' 2>&1 | grep -E "OK|FAILED|PASSED|Failure|unit" | head -20
timeout 200 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt2 --gtest_filter='MixedWorkGpu.*' > /tmp/mc.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" /tmp/mc.log | tail -4
echo "done $SECONDS s"
