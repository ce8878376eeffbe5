#!/usr/bin/env bash
# Run 93: first the work-list builder's GPU tests at HEAD (b2e81f0 moved its scan into
# kernels/common/block_scan.cuh; not run since), under memcheck too; then run92_s.sh (the
# empty-sequence skip). Carry ["build-r92"]: gth.xz (HEAD GPU tests), gts.xz (HEAD + skip patch).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r92/gth.xz > /tmp/gth && chmod +x /tmp/gth
timeout 120 /tmp/gth --gtest_filter='MixedWorkGpu.*:*Dequant*' 2>&1 | grep -E '^\[ *(OK|FAILED|PASSED) ' | cut -c1-120
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gth --gtest_filter='MixedWorkGpu.*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | head
echo "builder $SECONDS s"
bash lab/calls/run92_s.sh
