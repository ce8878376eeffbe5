#!/usr/bin/env bash
# Run 92, if call A's pf takes FP8 B=1 4k to >= 0.98x of 31f9961 and holds 1k: the quant suite
# guard, 31f9961 / pffull (HEAD + the scale prefetch, CI config) twice (run91_q.sh, no micro rounds).
# Carry ["build-r92"] (run92_a.sh's links).
set -uo pipefail
SKIP_A=1 SKIP_M=1 bash lab/calls/run92_a.sh >/dev/null 2>&1
DEADLINE=${DEADLINE:-400} MICRO_ROUNDS=0 SUITE_NEW=pffull COMMIT=pf bash lab/calls/run91_q.sh
