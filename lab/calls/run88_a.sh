#!/usr/bin/env bash
# Run 88, call A: run84_f.sh (H200 quant guard, then the decode suite with cuDNN's dense column)
# with HEAD 5ae5a6a's CI-configuration CLI carried in build-bin/splitkv.xz.
COMMIT=5ae5a6a exec bash "$(dirname "$0")/run84_f.sh" "$@"
