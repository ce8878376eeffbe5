#!/usr/bin/env bash
# Run 82, call D: (1) the mixed route's split and merge kernels with their shared index helpers
# (build-new/, CI config): '*Mixed*' GPU tests; (2) ncu of mixed step (c), before (build-bin/,
# 4fba879) and after; (3) the quant suite of main, for issue 55's *_kc rows and issue 51's guard
# against quant-latest (an H200's) when this is an H200.
set -uo pipefail
D=${DEADLINE:-420}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-new/splitkv_gpu_tests.xz > /tmp/gt && xz -dc build-new/splitkv.xz > /tmp/new && xz -dc build-bin/splitkv.xz > /tmp/old
chmod +x /tmp/gt /tmp/new /tmp/old
pids=()
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 120 /tmp/gt --gtest_filter='*Mixed*' >/tmp/m.$i.log 2>&1 & pids+=($!)
done
for i in 0 1 2 3; do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/m.$i.log | tr '\n' ' ')"; done
grep -h -E '^\[  FAILED  \].*\(' /tmp/m.*.log | head
echo "tests $SECONDS s"
for c in old new; do
  SPLITKV_MIXED_ONLY=c timeout 90 ncu --metrics gpu__time_duration.sum --csv /tmp/$c bench --suite mixed --iters 1 >/tmp/ncu.csv 2>/dev/null
  echo "== ncu mixed (c) $c rc=$?"; python3 lab/calls/ncu_summary.py /tmp/ncu.csv | grep -i "mixed_" | head -8
done
echo "ncu $SECONDS s"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ $(left) -gt 100 ]; then
  SPLITKV_COMMIT=main timeout $(( $(left) - 5 )) /tmp/new bench --suite quant --json $OUT/quant-main.json >/tmp/q.log 2>&1
  echo "quant rc=$? $SECONDS s"; tail -5 /tmp/q.log | cut -c1-150
fi
echo "done $SECONDS s"
