#!/usr/bin/env bash
# The splitkv::dist tests with one process per GPU.
#   scripts/run_dist_tests.sh BUILD_DIR [N]   (N: default every GPU nvidia-smi lists)
# Logs: $OUT/dist-rank<r>.log (OUT default: BUILD_DIR).
set -uo pipefail
BUILD=${1:?usage: run_dist_tests.sh BUILD_DIR [N]}
N=${2:-$(nvidia-smi --list-gpus | wc -l)}
exec "$(dirname "$0")/run_ranks.sh" "$N" "${OUT:-$BUILD}/dist-rank" "$BUILD/tests/splitkv_dist_tests" --gtest_brief=1
