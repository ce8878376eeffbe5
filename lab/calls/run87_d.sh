#!/usr/bin/env bash
# Run 87, call D (any H100/H200; carry ["build-i4"]): run87_a.sh with binaries built on this
# machine instead of the device: build-i4/main.xz (main 0551d5a) and build-i4/new.xz (main + the
# INT4 D=64 8-row four-blocks patch, lab/patches/run86-int4-d64-n8-four-blocks.patch), both sm_90a
# bf16 D=64 native + INT4 CLIs; build-i4/gt.xz, the patch's GPU tests (D=64 and 128, native + INT4).
# Prediction (from FP8's 8-row block, run 86): INT4 D=64 q_len 1 window rows 10-25% faster; plain
# and capped rows level.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for b in main new; do xz -dc build-i4/$b.xz > /tmp/skv-$b && chmod +x /tmp/skv-$b; done
G="--hq 64 --hkv 8 -d 64 --kv-format int4"
AB_TIMEOUT=30 bash scripts/ab.sh /tmp/skv-main /tmp/skv-new 2 -- \
  "-b 256 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192 --window 128,-1 --sinks" \
  "-b 1 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192 --window 4096,-1" \
  "-b 16 --lq 1 $G --lk 32768 --window 4096,-1" "-b 64 --lq 1 $G --lk 8192" "-b 64 --lq 1 $G --lk 8192 --softcap 30" \
  "-b 16 --lq 4 --causal --hq 32 --hkv 32 -d 64 --kv-format int4 --lk 8192 --window 1000,-1" 2>&1 | tail -11
echo "ab $SECONDS s"
bash lab/calls/gpu_test_shards.sh build-i4/gt.xz '*Quant*:*Variants*:*Sinks*:PromisesGpu.*:DecodeGpu.*:AdversarialGpu.*' 150
echo "done $SECONDS s"
