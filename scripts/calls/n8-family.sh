#!/usr/bin/env bash
# The run-54 binary with decode_mma_n8 named: the "new" side of scripts/ab.sh.
exec "$(dirname "$0")/../../build-carry/n8/splitkv" "$@" --family decode_mma_n8
