#!/usr/bin/env bash
# Run 81, call A: build-bin/ = HEAD (CI config). GPU tests of the chunked, kc and mixed-route
# families (validates 726579f's dequant mend) in 4 shards, beside compute-sanitizer memcheck on the
# chunked bad-page cases; then the quant suite A/B (ebce4af CI-config CLI vs HEAD) with the time
# left. <= 8 files under $OUT.
set -uo pipefail
D=${DEADLINE:-480}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-bin/splitkv_gpu_tests.xz > /tmp/gt && chmod +x /tmp/gt
F=${FILTER:-*ChunkedPrefill*:*Kc*:*MixedRoute*}
N=4; pids=()
for i in $(seq 0 $((N-1))); do
  GTEST_TOTAL_SHARDS=$N GTEST_SHARD_INDEX=$i timeout ${TEST_T:-150} /tmp/gt --gtest_filter="$F-*BadPage*" >/tmp/gtest.$i.log 2>&1 & pids+=($!)
done
timeout ${MEMCHECK_T:-150} compute-sanitizer --tool memcheck --print-limit 20 /tmp/gt --gtest_filter='*ChunkedPrefillBadPage*' >/tmp/memcheck.log 2>&1; echo "memcheck rc=$? $SECONDS s"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" /tmp/memcheck.log | head -12
for i in $(seq 0 $((N-1))); do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/gtest.$i.log | tr '\n' ' ') last: $(grep -E '^\[ RUN' /tmp/gtest.$i.log | tail -1)"; done
cat /tmp/gtest.*.log /tmp/memcheck.log | xz -c > $OUT/gtest-a.log.xz
grep -h -E "^\[  FAILED  \].*\(" /tmp/gtest.*.log | head -20; grep -h -A4 "Failure" /tmp/gtest.*.log | head -40
echo "gtests done $SECONDS s"
DEADLINE=$(left) SUITE=quant A=build-ab/splitkv_base_ci.xz B=build-bin/splitkv.xz bash lab/calls/suite_ab.sh
