#!/usr/bin/env bash
# Run 53, call 3: the decode, prefill and quant suites (peers in the same run) on main's default
# build (every head dim, built here) and a short INT4 B=1 1k plan sweep.
set -uo pipefail
start=$(date +%s)
SPLITKV_PREBUILT=build-carry/full SPLITKV_STEPS=decode,prefill,quant SPLITKV_STEP_TIMEOUT=240 \
  SPLITKV_COMMIT=${COMMIT:-unknown} bash scripts/gpu_check.sh 2>&1 | tail -12
echo "suites done at $(( $(date +%s) - start )) s"
for args in "--kv-format bf16" "--kv-format int4" "--kv-format int4 --splits 4 --cluster" \
  "--kv-format int4 --splits 8 --cluster" "--kv-format int4 --splits 4" "--kv-format int4 --splits 8"; do
  for round in 1 2; do
    timeout 30 build-carry/full/splitkv bench -b 1 --lk 1024 $args 2>&1 | tail -1 | sed "s/^/int4-1k [$args] r$round: /"
  done
done | tee "$OUT/int4-1k-sweep.txt"
