#!/usr/bin/env bash
# Run 54, call 8: the clusters-of-2 rule (build-carry/pair): the decode GPU tests and memcheck on the
# new planner case, then the planned merge before (build-carry/n8) and after, interleaved.
set -uo pipefail
cd "$(dirname "$0")/../.."
SPLITKV_PREBUILT=build-carry/pair SPLITKV_STEPS=test,sanitize SPLITKV_STEP_TIMEOUT=300 \
  SPLITKV_TEST_FILTER='Cases/DecodeVsReference.*:DecodeGpu.*:Combine/DecodeGraphReplay.*:ContextShardsGpu.*:CombineGpu.*' \
  SPLITKV_SANITIZE_FILTER='*PlannedTwoSplits*:*n8_len1000*' \
  SPLITKV_EXPECT_TESTS='*PlannedTwoSplitsMergeInClustersOfTwo*' bash scripts/gpu_check.sh 2>&1 | tail -5 | cut -c1-1500
grep -E "^\[  FAILED|Failure" "$OUT/gpu_tests.log" | head -20
AB_OUT=$OUT/ab-pair.txt AB_TIMEOUT=40 bash scripts/ab.sh build-carry/n8/splitkv build-carry/pair/splitkv 3 -- \
  "-b 8 --lk 8192" "-b 8 --lk 32768" "-b 8 --lk 32768 --page-size 16" 2>&1 | tail -5
