#!/usr/bin/env bash
# Run 57, call 2 (bench/NOTES.md): prebuilt binaries carried in build-carry/.
#   build-full: main with prefill_sm90_gqa64 at D=64 (every head dim); build-exp: D=128 bf16 with
#   the consumers' turn barriers compiled out (SPLITKV_EXPERIMENT_NO_TURNS).
# 1. GPU tests of prefill_sm90_gqa64 (the new D=64 cases and the rest), memcheck on two D=64 cases;
# 2. A/B, 2 interleaved rounds: gqa64 by name against the planned tile on dense D=64 / D=128 rows;
#    no turns against main on the D=128 rows; the 128x64 tile against n80 at D=256.
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-full build-exp
tar -xJf build-carry/bins.tar.xz -C build-full && tar -xJf build-carry/exp.tar.xz -C build-exp
T=240
timeout -k 5 $T build-full/tests/splitkv_gpu_tests --gtest_filter='*PrefillVsReference*hd64*gqa64*' > "$OUT/gpu_tests.log" 2>&1
echo "gqa64 tests: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/gpu_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED' "$OUT/gpu_tests.log" | head
timeout -k 5 $T compute-sanitizer --tool memcheck --error-exitcode 9 build-full/tests/splitkv_gpu_tests \
  --gtest_filter='*hd64_fp16_causal_4097_sm90_gqa64:*hd64_varlen_causal_sm90_gqa64_splitkv' --gtest_brief=1 \
  > "$OUT/sanitizer.log" 2>&1
echo "memcheck: rc=$? $(grep 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)"
printf '#!/bin/bash\nexec %s "$@" --family prefill_sm90_gqa64\n' "$PWD/build-full/splitkv" > /tmp/splitkv-gqa64
printf '#!/bin/bash\nexec %s "$@" --family prefill_sm90\n' "$PWD/build-full/splitkv" > /tmp/splitkv-d256-128x64
chmod +x /tmp/splitkv-gqa64 /tmp/splitkv-d256-128x64
P="--mode prefill"
echo "==== gqa64 (new) against the planned tile (old) ===="
AB_OUT="$OUT/ab-gqa64.txt" bash scripts/ab.sh build-full/splitkv /tmp/splitkv-gqa64 2 -- \
  "$P -b 4 --hq 12 --hkv 12 --lq 1024 --lk 1024 -d 64 --dtype fp16" \
  "$P -b 4 --hq 12 --hkv 12 --lq 2048 --lk 2048 -d 64 --dtype fp16" \
  "$P -b 4 --hq 12 --hkv 12 --lq 4096 --lk 4096 -d 64 --dtype fp16" \
  "$P -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024 -d 128" | grep -v '^[0-9]'
echo "==== no turns (new) against main (old), D=128 bf16 ===="
AB_OUT="$OUT/ab-noturns.txt" bash scripts/ab.sh build-full/splitkv build-exp/splitkv 2 -- \
  "$P -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024" "$P -b 4 --hq 16 --hkv 16 --lq 4096 --lk 4096" \
  "$P -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384" "$P -b 4 --hq 16 --hkv 16 --lq 4096 --lk 4096 --causal" \
  "$P -b 4 --hq 32 --hkv 8 --lq 4096 --lk 4096 --causal" \
  | grep -v '^[0-9]'
