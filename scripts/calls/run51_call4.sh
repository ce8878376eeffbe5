#!/usr/bin/env bash
# Run 51, fourth call (main with the prefill route): decode GPU tests + memcheck of the new tests,
# then the decode suite with the peers and the quant suite (with its head-major INT4/K8V4 rows).
# build-carry/ holds splitkv and tests/splitkv_gpu_tests built from main (D=128 bf16, sm_90a).
set -u
export SPLITKV_PREBUILT=build-carry SPLITKV_STEPS=test,sanitize,decode,quant SPLITKV_STEP_TIMEOUT=280
export SPLITKV_COMMIT=${1:-unknown}
export SPLITKV_TEST_FILTER='*Decode*:*Combine*:*ContextShards*:Cases/ChunkedPrefillVsReference.*gqa64*'
export SPLITKV_EXPECT_TESTS='*PlannerRoute*:*prefill_route*'
export SPLITKV_SANITIZE_FILTER='*PlannerRoute*:*prefill_route*:*BadDeviceLengths*:*via_prefill_gqa64_q8*'
timeout 590 bash scripts/gpu_check.sh
