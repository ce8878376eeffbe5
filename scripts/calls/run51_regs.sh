#!/usr/bin/env bash
# Run 51, call 7: gqa64 with producer 40 / consumer 216 registers (build-carry/*-regs) against main's
# 24 / 232 (build-carry/splitkv): its GPU tests, then an interleaved A/B on the routed rows.
set -u
C=build-carry
T=$C/tests/splitkv_gpu_tests-regs
timeout 150 stdbuf -oL $T --gtest_filter='*gqa64*:*PlannerRoute*:*prefill_route*:*BadDeviceLengths*' > $OUT/tests-regs.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-regs.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests-regs.log | head
S=("-b 8 --hq 28 --hkv 4 --lk 8192 --lq 8 --causal" "-b 8 --hq 28 --hkv 4 --lk 32768 --lq 8 --causal"
   "-b 8 --hq 28 --hkv 4 --lk 8192 --lq 6 --causal --page-size 16" "-b 8 --hq 64 --hkv 8 --lk 8192 --lq 8 --causal"
   "-b 8 --hq 8 --hkv 1 --lk 8192 --lq 8 --causal" "-b 32 --hq 28 --hkv 4 --lk 4096 --lq 8 --causal"
   "--mode prefill -b 8 --hq 32 --hkv 8 --lq 256 --lk 8448 --causal --kv-cache --page-size 16 --family prefill_sm90_gqa64")
AB_OUT=$OUT/ab-regs.txt AB_TIMEOUT=60 scripts/ab.sh $C/splitkv $C/splitkv-regs 3 -- "${S[@]}" | tail -10
