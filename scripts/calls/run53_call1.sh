#!/usr/bin/env bash
# Run 53, call 1: wip/gqa64-deep on the H200: its GPU tests, memcheck on a routed and a chunked
# deep case, then the interleaved A/B against main's kernels (build-carry/route = main 5e9c3ff+).
set -uo pipefail
SPLITKV_PREBUILT=build-carry/deep SPLITKV_STEPS=test,sanitize SPLITKV_STEP_TIMEOUT=240 SPLITKV_COMMIT=57a7ac3 \
  SPLITKV_TEST_FILTER='DecodeGpu.PlannerRoute*:*gqa64*:*GraphReplay*' \
  SPLITKV_SANITIZE_FILTER='DecodeGpu.PlannerRoute*:*contiguous_causal_gqa64_deep*' \
  bash scripts/gpu_check.sh 2>&1 | tail -5
grep -E '^\[  (FAILED|PASSED)|tests ran' "$OUT/gpu_tests.log" | head -20
grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -2
AB_OUT=$OUT/ab-deep.txt bash scripts/ab.sh build-carry/route/splitkv build-carry/deep/splitkv 3 -- \
  "-b 8 --hq 28 --hkv 4 --lq 8 --causal --lk 2048" \
  "-b 8 --hq 28 --hkv 4 --lq 8 --causal --lk 8192" \
  "-b 8 --hq 28 --hkv 4 --lq 4 --causal --lk 8192" \
  "-b 8 --lq 8 --causal --lk 8192" \
  "-b 8 --hq 28 --hkv 4 --lq 4 --causal --lk 8192 --page-size 16" | tail -8 | tee -a $OUT/ab-deep.txt
