#!/usr/bin/env bash
# Run 94, call E: call D's tree plus two fixes: the stream kernel only for decode_mma_m32 (an FP8
# cache's short twin got a persistent grid its launcher does not walk: TheVariantsTwins failed),
# the quant launchers refusing a persistent grid, and the mixed route only where its decode parts'
# families are compiled (a native;fp8 build's INT4/INT8 chunked prefill failed to run).
# Carry ["build-r94e"]: gt.xz, cli.xz (sm_90a bf16 D=64;128 native;fp8). The GPU tests of the
# decode variants, quantized decode, chunked prefill, prefill, the route and the promises, then
# memcheck over the twins' test and the chunked prefill cases.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-r94e/gt.xz '*Chunk*:*DecodeVariants*:*Sinks*:Mixes/*:MixedRoute*:*Promises*:*Quant*:*Zero*:*Prefill*' 150
echo "tests $SECONDS s"
timeout 200 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt --gtest_filter='DecodeVariantsGpu.TheVariantsTwins*:Cases/ChunkedPrefillVsReference.*int*:Formats/ChunkedPrefillBadPage.*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | head
echo "done $SECONDS s"
