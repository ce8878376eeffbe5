#!/usr/bin/env bash
# Builds (scripts/setup.sh) and runs every test through CTest. CPU tests always run; GPU tests
# skip with a message when there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${SPLITKV_BUILD_DIR:-build}" --output-on-failure
