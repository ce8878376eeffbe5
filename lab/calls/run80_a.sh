#!/usr/bin/env bash
# Run 80, call A: no build on the device (binaries carried: build-bin/ = main's CI config,
# build-ab/ = the prefill A/B CLIs ebce4af and main). The new chunked-prefill case, the variants
# suite (D=128 rows), then the prefill suite A/B interleaved old/new/new/old. <= 8 files under $OUT.
set -uo pipefail
D=${DEADLINE:-420}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for x in splitkv splitkv_gpu_tests; do xz -dc build-bin/$x.xz > /tmp/$x && chmod +x /tmp/$x; done
for x in base new; do xz -dc build-ab/splitkv_$x.xz > /tmp/ab_$x && chmod +x /tmp/ab_$x; done
export SPLITKV_COMMIT=${C:-run80}
if [ -z "${NO_TESTS:-}" ]; then
pids=()
for i in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 100 /tmp/splitkv_gpu_tests --gtest_filter="${FILTER:-*ChunkedPrefill*}" >/tmp/gtest.$i.log 2>&1 & pids+=($!)
done
for i in 0 1; do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/gtest.$i.log | tr '\n' ' ')"; done
cat /tmp/gtest.*.log > $OUT/gtest.log
grep -h -E "^\[  FAILED  \].*\(" $OUT/gtest.log | head; grep -h -A4 "Failure" $OUT/gtest.log | head -30
grep -h "300_short" $OUT/gtest.log | head -3
echo "gtests done $SECONDS s"
fi
timeout ${VAR_T:-100} /tmp/splitkv bench --suite variants --json $OUT/variants-ours.json >$OUT/variants.log 2>&1; echo "variants rc=$? $SECONDS s"
grep -v "^ *$" $OUT/variants.log | tail -30
for r in base:old1 new:new1 new:new2 base:old2; do
  T=$(( $(left) - 5 )); [ $T -lt 60 ] && { echo "no time for $r"; break; }
  SPLITKV_COMMIT=${r%%:*} timeout $T /tmp/ab_${r%%:*} bench --suite prefill --json $OUT/prefill-${r##*:}.json >>/tmp/prefill.log 2>&1
  echo "prefill $r rc=$? $SECONDS s"
done
cp /tmp/prefill.log $OUT/prefill.log 2>/dev/null
echo "done $SECONDS s"
