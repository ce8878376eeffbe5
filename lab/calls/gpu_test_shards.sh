#!/usr/bin/env bash
# Runs a carried (xz'd) GPU test binary in 4 shards at once on the device, under timeout, and
# prints each shard's counts, the failed tests and the first failure messages.
#   lab/calls/gpu_test_shards.sh BINARY.xz GTEST_FILTER [SECONDS_PER_SHARD]
set -uo pipefail
xz -dc "$1" > /tmp/gt && chmod +x /tmp/gt
pids=()
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout "${3:-150}" /tmp/gt --gtest_filter="$2" >/tmp/g.$i.log 2>&1 & pids+=($!)
done
for i in 0 1 2 3; do
  wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/g.$i.log | tr '\n' ' ')"
done
grep -h -E '^\[  FAILED  \]' /tmp/g.*.log | cut -c1-120 | head
grep -h -B3 -E 'Failure' /tmp/g.*.log | head -30 | cut -c1-200
