#!/usr/bin/env bash
# Run 88, call B (any H100/H200; carry ["build-r2"]): the uncapped variants instance of
# decode_kernel without the sinks fold, taken where p.sinks is null (several splits, whose sink the
# combine folds, or no sinks) (lab/patches/run87-decode-no-fold-twin.patch). Issue 51's R2: B=1
# 32/8 D=128 q_len 4 8k window 128 + sinks 7.13 us at 1c46349 -> 7.39 at main, bisected to
# 2f4bcb4 (the fold); sm_90a bf16 D=128: the variants instance 4832 SASS instructions with the
# fold, 4632 without (1c46349: 4680), 203 registers either way.
# Build here first (sm_90a bf16 D=128 native, tests on for the patch):
#   build-r2/main.xz (main's CLI), build-r2/new.xz (the patch's CLI), build-r2/gt.xz (its GPU tests).
# Prediction: R2 7.39 -> 7.1-7.2; single-split sinks rows level (they keep the fold).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for b in main new; do xz -dc build-r2/$b.xz > /tmp/skv-$b && chmod +x /tmp/skv-$b; done
AB_OUT=$OUT/ab.tsv AB_TIMEOUT=30 bash scripts/ab.sh /tmp/skv-main /tmp/skv-new 3 -- \
  "-b 1 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --window 128,-1 --sinks" \
  "-b 1 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --window 128,-1" \
  "-b 8 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 32768 --window 4096,-1 --sinks" \
  "-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --window 128,-1 --sinks" \
  "-b 8 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192" > $OUT/ab.txt 2>&1
grep -A10 "^| shape" $OUT/ab.txt
bash lab/calls/gpu_test_shards.sh build-r2/gt.xz '*Variants*:*Sinks*:PromisesGpu.*:AdversarialGpu.*:DecodeGpu.*' 100
echo "done $SECONDS s"
