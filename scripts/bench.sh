#!/usr/bin/env bash
# Sets everything up and runs the main job: `splitkv bench` (the decode suite on a GPU; without
# one it says so and runs the CPU backend on a small problem). Extra arguments go to the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
"${SPLITKV_BUILD_DIR:-build}/splitkv" bench "$@"
