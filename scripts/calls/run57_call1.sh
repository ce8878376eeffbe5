#!/usr/bin/env bash
# Run 57, call 1 (bench/NOTES.md): prebuilt binaries (build-full, every head dim/dtype/format, sm_90a).
# 1. GPU tests of the prefill and chunked-prefill split cases (split_span re-applied), memcheck on two;
# 2. the CUTLASS example peer and the prefill suite with cuDNN / FlashAttention-2 (one table);
# 3. run 56's split sweep of the quantized B=1 1k rows.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-full
mkdir -p $B && tar -xJf build-carry/bins.tar.xz -C $B
SPLITKV_PREBUILT=$B SPLITKV_STEPS=test,sanitize,cutlasspeer,prefill SPLITKV_COMMIT=${COMMIT:-unknown} \
  SPLITKV_TEST_FILTER='*PrefillVsReference*sm90*splitkv:*PrefillVsReference*/*_mma_splitkv:*Chunk*splits*:PrefillGpu.*' \
  SPLITKV_SANITIZE_FILTER='*contiguous_splits:*page16_splits:*len1000_sm90_splitkv:*causal_square_1000_sm90_splitkv' \
  SPLITKV_STEP_TIMEOUT=240 bash scripts/gpu_check.sh > /tmp/gpu_check.txt 2>&1
sed -n '/==== summary/,/^| B /p' /tmp/gpu_check.txt
echo "==== quantized B=1 1k split sweep ===="
for fmt in bf16 int8 int4; do
  for s in "" "--splits 16" "--splits 16 --no-auto-cluster" "--splits 8 --no-auto-cluster"; do
    line=$(timeout 60 $B/splitkv bench -b 1 --lk 1024 --hq 32 --hkv 8 --kv-format $fmt $s 2>&1 | tail -1)
    echo "$fmt [${s:-planned}]: $line"
  done
done | tee "$OUT/quant-1k-sweep.txt"
