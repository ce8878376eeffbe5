#!/usr/bin/env bash
# Run 50, first GPU call (branch wip/run50): correctness of the barrier-free combine and of
# prefill_sm90_gqa64. build-carry/ holds splitkv_gpu_tests built from the branch (D=128 bf16).
set -u
C=build-carry; T=$C/splitkv_gpu_tests
F='*Decode*:*Combine*:*ContextShards*:Cases/PrefillVsReference.*splitkv*:Cases/PrefillVsReference.*gqa64*:Cases/ChunkedPrefillVsReference.*split*:Cases/ChunkedPrefillVsReference.*gqa64*:Cases/ChunkedPrefillVsReference.*head_major*:-*ChunkedPrefill*int8*:*ChunkedPrefill*int4*:*ChunkedPrefill*fp8*:*ChunkedPrefill*k8v4*'
echo "tests listed: $($T --gtest_list_tests --gtest_filter="$F" | grep -c '^  ') (gqa64: $($T --gtest_list_tests --gtest_filter='*gqa64*' | grep -c '^  '))"
timeout 330 stdbuf -oL $T --gtest_filter="$F" > $OUT/tests.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests.log | head -20
[[ $(grep -c '^\[ RUN' $OUT/tests.log) -gt $(grep -cE '^\[       OK|^\[  FAILED  \] .*\(|^\[  SKIPPED \] .*\(' $OUT/tests.log) ]] && echo "last RUN: $(grep '^\[ RUN' $OUT/tests.log | tail -1)"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*via_prefill_gqa64_q8*:*via_prefill_gqa64_q4*:Cases/ChunkedPrefillVsReference.*gqa64*:*len129_sm90_gqa64*:Cases/ChunkedPrefillVsReference.*head_major*:Cases/DecodeVsReference.*head_major*:*int4_head_major*:*fused_16_splits*:*fused_spec_q16*:*m32_fused*:*cluster_16_splits*:CombineGpu.*:Combine/DecodeGraphReplay.*' --gtest_brief=1 > $OUT/memcheck.log 2>&1
echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $OUT/memcheck.log | tail -1)"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='*page16_spec_splits_gqa64_28_4*:*len129_sm90_gqa64_splitkv*:*fused_16_splits*:*m32_fused*:CombineGpu.*' --gtest_brief=1 > $OUT/racecheck.log 2>&1
echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $OUT/racecheck.log | tail -1)"
