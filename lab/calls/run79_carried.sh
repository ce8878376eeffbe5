#!/usr/bin/env bash
# Run 79: no build on the device. Binaries built on the CPU machine and carried xz'd:
# build-bin/ (build-ci's CLI and GPU tests: sm_80 + sm_90a, bf16 D=128, every format) and
# build-ab/ (the prefill A/B CLIs: ebce4af and main, D 64/128/256, fp16/bf16, native/int8/int4).
# The new code's GPU tests in 4 shards, the mixed suite, then the prefill suite A/B.
set -uo pipefail
D=${DEADLINE:-400}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for x in splitkv splitkv_gpu_tests; do xz -dc build-bin/$x.xz > /tmp/$x && chmod +x /tmp/$x; done
export SPLITKV_COMMIT=${C:-run79}
F=${FILTER:-*MixedRoute*:*DecodeVariants*:*ChunkedPrefill*:*Dequant*:*Kc*:*KC*:*Softcap*}
pids=()
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TEST_T:-130} /tmp/splitkv_gpu_tests --gtest_filter="$F" >$OUT/gtest.$i.log 2>&1 & pids+=($!)
done
for i in 0 1 2 3; do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' $OUT/gtest.$i.log | tr '\n' ' ') last: $(grep -E '^\[ RUN' $OUT/gtest.$i.log | tail -1)"; done
grep -h -E "^\[  FAILED  \].*\(" $OUT/gtest.*.log | head -20; grep -h -A4 "Failure" $OUT/gtest.*.log | head -40
echo "gtests done $SECONDS s"
timeout ${MIXED_T:-120} /tmp/splitkv bench --suite mixed --json $OUT/mixed-ours.json >$OUT/mixed.log 2>&1; echo "mixed rc=$? $SECONDS s"
grep -v "^ *$" $OUT/mixed.log | tail -40
for x in base new; do xz -dc build-ab/splitkv_$x.xz > /tmp/ab_$x && chmod +x /tmp/ab_$x; done
for r in base:old1 new:new1 new:new2 base:old2; do
  T=$(( $(left) - 5 )); [ $T -lt 40 ] && { echo "no time for $r"; break; }
  SPLITKV_COMMIT=${r%%:*} timeout $T /tmp/ab_${r%%:*} bench --suite prefill --json $OUT/prefill-${r##*:}.json >$OUT/prefill-${r##*:}.log 2>&1
  echo "prefill $r rc=$? $SECONDS s"
done
echo "done $SECONDS s"
