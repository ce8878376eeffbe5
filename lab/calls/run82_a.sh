#!/usr/bin/env bash
# Next session, call A (prepared in run 81): the capped exp2_poly patch. build-binp/ = main + the
# patch (CI config), build-bin/ = main. (1) '*PrefillVariants*' with the patch in 4 shards; (2) the
# variants-prefill suite main / patch / patch / main, a warm row first; (3) prefill_mma capped 8k
# main and patch; (4) the share of FMA exponentials swept; (5) the variants instance's cost on a
# dense row; (6) with build-d64/ present, the D=64 variants GPU tests. <= 8 files under $OUT.
set -uo pipefail
D=${DEADLINE:-420}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-binp/splitkv_gpu_tests.xz > /tmp/gt && xz -dc build-binp/splitkv.xz > /tmp/patch
xz -dc build-bin/splitkv.xz > /tmp/main && chmod +x /tmp/gt /tmp/patch /tmp/main
N=4; pids=()
for i in $(seq 0 $((N-1))); do
  GTEST_TOTAL_SHARDS=$N GTEST_SHARD_INDEX=$i timeout ${TEST_T:-110} /tmp/gt --gtest_filter="${FILTER:-*PrefillVariants*:*Softcap*}" >/tmp/gtest.$i.log 2>&1 & pids+=($!)
done
for i in $(seq 0 $((N-1))); do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' /tmp/gtest.$i.log | tr '\n' ' ')"; done
cat /tmp/gtest.*.log | xz -c > $OUT/gtest-a.log.xz
grep -h -E "^\[  FAILED  \].*\(" /tmp/gtest.*.log | head -20; grep -h -A4 "Failure" /tmp/gtest.*.log | head -30
echo "gtests done $SECONDS s"
W="--mode prefill -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 --causal --iters 20"
for r in main:m1 patch:p1 patch:p2 main:m2; do
  [ $(left) -lt 90 ] && { echo "no time for $r"; break; }
  timeout 30 /tmp/${r%%:*} bench $W >/dev/null 2>&1  # a warm row first (the suite's first row meets the power cap)
  SPLITKV_COMMIT=${r%%:*} timeout 60 /tmp/${r%%:*} bench --suite variants-prefill --json $OUT/vp-${r##*:}.json >/tmp/vp.$r.log 2>&1
  echo "variants-prefill $r rc=$? $SECONDS s"; cut -c100-170 /tmp/vp.$r.log
done
S="--mode prefill -b 1 --hq 32 --hkv 8 --lq 8192 --lk 8192 --causal --family prefill_mma --iters 20"
for c in main patch; do for cap in 0 50; do
  X=""; [ $cap -gt 0 ] && X="--softcap $cap"
  echo "mma $c cap=$cap: $(timeout 30 /tmp/$c bench $S $X 2>&1 | tail -1 | cut -c100-170)"
done; done
# The share of FMA exponentials (build-binp/splitkv_13 and _23: 1/3 and 2/3, sm_90a bf16 D=128):
# prefill_sm90 16k causal with softcap 50 at each share (main: none; patch: 1/2).
for c in main patch 13 23; do
  [ -x /tmp/$c ] || { [ -f build-binp/splitkv_$c.xz ] && xz -dc build-binp/splitkv_$c.xz > /tmp/$c && chmod +x /tmp/$c; } || continue
  echo "16k causal cap 50, $c: $(timeout 30 /tmp/$c bench $W --iters 50 --softcap 50 2>&1 | tail -1 | cut -c100-170)"
done
# The variants instance's own cost (issue 53's window rate 0.87x of dense causal): dense causal 16k
# through the plain instance (with and without its stream-K tail, which variants plans never take)
# and through the variants instance (a window wider than the context).
for w in "" "--no-stream-k" "--window 16384,-1"; do
  echo "16k causal ${w:-plain}: $(timeout 30 /tmp/main bench $W --iters 50 $w 2>&1 | tail -1 | cut -c100-170)"
done
if [ -f build-d64/splitkv_gpu_tests.xz ] && [ $(left) -gt 100 ]; then
  xz -dc build-d64/splitkv_gpu_tests.xz > /tmp/gt64 && chmod +x /tmp/gt64
  timeout $(( $(left) - 10 )) /tmp/gt64 --gtest_filter='*Variants*:*Sinks*' >/tmp/gt64.log 2>&1; echo "d64 rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' /tmp/gt64.log | tr '\n' ' ')"
  xz -c /tmp/gt64.log > $OUT/gtest-d64.log.xz
fi
echo "done $SECONDS s"
