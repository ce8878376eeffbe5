#!/usr/bin/env bash
# Run 54, call 5: decode_mma_n8 with a 4-stage ring at D=128 (build-carry/s4, one block per SM)
# against the 3-stage ring (build-carry/n8), interleaved, three rounds.
set -uo pipefail
cd "$(dirname "$0")/../.."
AB_OUT=$OUT/ab-s4.txt AB_TIMEOUT=40 bash scripts/ab.sh build-carry/n8/splitkv build-carry/s4/splitkv 3 -- \
  "-b 1 --lk 4096" "-b 1 --lk 16384" "-b 1 --lk 65536" "-b 1 --lk 131072" "-b 8 --lk 8192" "-b 8 --lk 32768" \
  "-b 32 --lk 4096" "-b 128 --lk 1024" "-b 8 --lk 8192 --lq 2 --causal" 2>&1 | tail -12
