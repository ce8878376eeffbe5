#!/usr/bin/env bash
# Run 54, call 2: every decode-side GPU test (decode, combine, quantized decode, context shards) on
# the default build's instantiations (all head dims and dtypes), now that the planner routes <= 8
# packed rows to decode_mma_n8; memcheck over the n8 cases of the other head dims and dtypes.
set -uo pipefail
cd "$(dirname "$0")/../.."
SPLITKV_PREBUILT=build-carry/full SPLITKV_STEPS=test,sanitize SPLITKV_STEP_TIMEOUT=400 \
  SPLITKV_TEST_FILTER='-Cases/PrefillVsReference.*:PrefillGpu.*:Cases/ChunkedPrefillVsReference.*:Formats/ChunkedPrefillBadPage.*:Formats/AppendKvGpu.*:AppendKvGpuSingle.*' \
  SPLITKV_SANITIZE_FILTER='*n8_hd64*:*n8_hd256*:*n8_fp16*:*n8_cluster_hd256*:*hd64_fp16:*mqa_8_1*' \
  SPLITKV_EXPECT_TESTS='*n8_hd256_fp16_paged_causal*' bash scripts/gpu_check.sh 2>&1 | tail -6 | cut -c1-3000
grep -E "^\[  FAILED|Failure" "$OUT/gpu_tests.log" | head -20
grep -cE "^\[       OK" "$OUT/gpu_tests.log"
