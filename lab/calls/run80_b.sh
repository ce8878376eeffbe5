#!/usr/bin/env bash
# Run 80, call B: build-binp/ = main + the route's tile skip + the dequant work list (CI config).
# Its GPU tests (chunked prefill, mixed route, kc, promises), the mixed suite, step (c) under ncu
# (each kernel's time), then the page-256 prefill rows at bisect points (build-bis/, narrow
# builds) beside the A/B CLIs (build-ab/). <= 8 files under $OUT.
set -uo pipefail
D=${DEADLINE:-560}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-binp/splitkv_gpu_tests.xz > /tmp/gt && xz -dc build-binp/splitkv.xz > /tmp/cli && chmod +x /tmp/gt /tmp/cli
export SPLITKV_COMMIT=${C:-run80}
F=${FILTER:-*ChunkedPrefill*:*MixedRoute*:*Kc*:*Adversarial*:*Promises*}
pids=()
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TEST_T:-120} /tmp/gt --gtest_filter="$F" >/tmp/gtest.$i.log 2>&1 & pids+=($!)
done
for i in 0 1 2 3; do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/gtest.$i.log | tr '\n' ' ') last: $(grep -E '^\[ RUN' /tmp/gtest.$i.log | tail -1)"; done
cat /tmp/gtest.*.log > $OUT/gtest-b.log
grep -h -E "^\[  FAILED  \].*\(" $OUT/gtest-b.log | head -20; grep -h -A4 "Failure" $OUT/gtest-b.log | head -40
grep -h -E "OK .*(300_short|2100)" $OUT/gtest-b.log
echo "gtests done $SECONDS s"
timeout ${MIXED_T:-120} /tmp/cli bench --suite mixed --json $OUT/mixed-b.json >$OUT/mixed-b.log 2>&1; echo "mixed rc=$? $SECONDS s"
grep -E "route|separate  " $OUT/mixed-b.log
SPLITKV_MIXED_ONLY=c timeout ${NCU_T:-100} ncu --metrics gpu__time_duration.sum --csv /tmp/cli bench --suite mixed --iters 1 >/tmp/ncu.csv 2>/tmp/ncu.err
echo "ncu rc=$? $SECONDS s"; tail -3 /tmp/ncu.err
python3 lab/calls/ncu_summary.py /tmp/ncu.csv > $OUT/ncu-c.txt; head -80 $OUT/ncu-c.txt
for x in build-bis/*.xz build-ab/*.xz; do n=$(basename $x .xz); xz -dc $x > /tmp/$n && chmod +x /tmp/$n; done
SHAPE="bench --mode prefill --kv-cache --causal --page-size 256 --hq 32 --hkv 8 -d 128 --dtype bf16"
for round in 1 2; do
  [ $(left) -lt 90 ] && { echo "no time for bisect round $round"; break; }
  for n in splitkv_base $(ls build-bis | sed 's/.xz$//') splitkv_new; do
    a=$(timeout 30 /tmp/$n $SHAPE -b 8 --lq 256 --lk 8448 2>&1 | tail -1)
    c=$(timeout 30 /tmp/$n $SHAPE -b 1 --lq 1024 --lk 33792 2>&1 | tail -1)
    echo "bisect $round $n | $a | $c"
  done
done 2>&1 | tee $OUT/bisect.log
T=$(( $(left) - 5 ))
if [ $T -gt 40 ]; then
  timeout $T /tmp/splitkv_new bench --suite variants --json $OUT/variants-ab.json >/tmp/variants-ab.log 2>&1; echo "variants (A/B CLI: D 64/128/256, no fp8) rc=$? $SECONDS s"
  grep -v "not compiled" /tmp/variants-ab.log | tail -40
fi
echo "done $SECONDS s"
