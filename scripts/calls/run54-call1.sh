#!/usr/bin/env bash
# Run 54, call 1: decode_mma_n8's GPU tests (and memcheck on them), then an interleaved A/B against
# the planner's decode_mma on the decode suite's rows of at most 8 packed rows.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-carry/n8
SPLITKV_PREBUILT=$B SPLITKV_STEPS=test,sanitize SPLITKV_STEP_TIMEOUT=300 \
  SPLITKV_TEST_FILTER='*n8*:*Deterministic*:*BadDevice*:*len1000*:*spec_decode*' \
  SPLITKV_SANITIZE_FILTER='*n8_len1000*:*n8_q2*:*n8_paged16*:*n8_fused*:*n8_cluster_16*:*n8_hd64_fp16*:*BadDevice*' \
  SPLITKV_EXPECT_TESTS='*n8_q2_causal_32_8*' bash scripts/gpu_check.sh 2>&1 | tail -8
grep -E "^\[  FAILED|Failure|FAILED" "$OUT/gpu_tests.log" | head -20
AB_OUT=$OUT/ab.txt AB_TIMEOUT=40 bash scripts/ab.sh $B/splitkv scripts/calls/n8-family.sh 3 -- \
  "-b 1 --lk 1024" "-b 1 --lk 4096" "-b 1 --lk 16384" "-b 1 --lk 65536" "-b 8 --lk 8192" "-b 8 --lk 32768" \
  "-b 32 --lk 4096" "-b 64 --lk 2048" "-b 128 --lk 1024" "-b 1 --lk 32768 --hq 32 --hkv 32" \
  "-b 4 --lk 32768 --hq 64 --hkv 8" "-b 8 --lk 8192 --lq 2 --causal" "-b 8 --lk 32768 --page-size 16" \
  2>&1 | tail -16
