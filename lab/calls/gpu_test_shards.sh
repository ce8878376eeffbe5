#!/usr/bin/env bash
# Runs a carried (xz'd) GPU test binary in shards at once on the device (SHARDS, default 4), under
# timeout, and prints each shard's counts, the failed tests and the first failure messages.
#   [SHARDS=N] lab/calls/gpu_test_shards.sh BINARY.xz GTEST_FILTER [SECONDS_PER_SHARD]
set -uo pipefail
n=${SHARDS:-4}
xz -dc "$1" > /tmp/gt && chmod +x /tmp/gt
pids=()
for ((i = 0; i < n; i++)); do
  GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "${3:-150}" /tmp/gt --gtest_filter="$2" >/tmp/g.$i.log 2>&1 & pids+=($!)
done
for ((i = 0; i < n; i++)); do
  wait ${pids[$i]}; rc=$?
  echo "shard $i rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/g.$i.log | tr '\n' ' ')"
  # A shard stopped by its timeout: the test it was running.
  [ $rc -eq 124 ] && echo "  still running: $(grep -E '^\[ RUN      \]' /tmp/g.$i.log | tail -1 | cut -c1-150)"
done
grep -h -E '^\[  FAILED  \]' /tmp/g.*.log | cut -c1-120 | head
grep -h -B3 -E 'Failure' /tmp/g.*.log | head -30 | cut -c1-200
