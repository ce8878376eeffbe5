#!/usr/bin/env bash
# Run 53, call 2: prefill_sm90's ring warm-up (bench/NOTES.md, run 53, call 2). GPU tests of the
# warm-up-1 build, then interleaved A/B of main's kernels against warm-up 2 and warm-up 1.
set -uo pipefail
SPLITKV_PREBUILT=build-carry/warm1 SPLITKV_STEPS=test SPLITKV_STEP_TIMEOUT=300 SPLITKV_COMMIT=warm1 \
  SPLITKV_TEST_FILTER='DecodeGpu.PlannerRoute*:*Chunked*:*PrefillVsReference*sm90*:*GraphReplay*:*PrefillGpu*' \
  bash scripts/gpu_check.sh >/dev/null 2>&1
grep -E '^\[  (FAILED|PASSED)|tests ran' "$OUT/gpu_tests.log" | head -20
rows=("-b 8 --hq 28 --hkv 4 --lq 8 --causal --lk 2048"
  "-b 8 --hq 28 --hkv 4 --lq 8 --causal --lk 8192"
  "-b 8 --hq 28 --hkv 4 --lq 4 --causal --lk 8192"
  "-b 8 --lq 8 --causal --lk 8192"
  "-b 8 --lq 4 --causal --lk 8192"
  "--mode prefill -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024"
  "--mode prefill -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024 --causal"
  "--mode prefill -b 4 --hq 16 --hkv 16 --lq 4096 --lk 4096"
  "--mode prefill -b 8 --hq 32 --hkv 8 --lq 256 --lk 8448 --causal")
AB_OUT=$OUT/ab-warm2.txt bash scripts/ab.sh build-carry/route/splitkv build-carry/warm2/splitkv 2 -- "${rows[@]}" | tail -11
AB_OUT=$OUT/ab-warm1.txt bash scripts/ab.sh build-carry/route/splitkv build-carry/warm1/splitkv 2 -- "${rows[@]}" | tail -11
