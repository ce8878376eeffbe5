#!/usr/bin/env bash
# Run 95 (planned in run 94), call A: every GPU test on run 94's final sources with every KV format
# (build-full: sm_90a bf16 D=64;128, native fp8 int8 int4 k8v4 and the *_kc formats; tests on).
# Run 94 turned the mixed route and the stream kernel on by default; its last full run (call D,
# H100) lacked the INT4/INT8 kernels and its fixes were checked on their own tests only.
# Carry ["build-r95"]: gt.xz (GPU tests), cli.xz (CLI). Set COMMIT to the commit built.
# Expected: every test passes or skips (fp16 and D=256 instances are not in this build).
# Then the variants suite's gpt-oss rows with the stream kernel (ours only; Flex in call B).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
SHARDS=8 bash lab/calls/gpu_test_shards.sh build-r95/gt.xz '*' 420
echo "tests $SECONDS s"
timeout 60 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt --gtest_filter='DecodeVariantsGpu.TheStreamKernel*:DecodeVariantsGpu.TheVariantsTwins*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | head
echo "done $SECONDS s"
