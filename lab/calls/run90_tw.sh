#!/usr/bin/env bash
# Run 90 (planned in run 89), the two-warp short-block twins, bf16's 32-row and FP8's 16-row tile at
# D=64 (lab/patches/run89-two-warp-short-twins.patch;
# carry ["build-tw"]: base.xz = HEAD's CLI, new.xz = HEAD + the patch, gt.xz = the patch's GPU
# tests; sm_90a bf16 D=64 native + fp8).
#  1. GPU tests of the patch: '*Variants*:*Sinks*:*Decode*:PromisesGpu.*:AdversarialGpu.*'.
#     Expected: all pass (DecodeVariantsGpu.TheVariantsTwinsMatchTheReference checks both twins).
#  2. A/B base/new, two rounds. Prediction (H200, from run 89's global two-warp A/B): gpt-oss q_len
#     4 window 128 + sinks B=64 22.4 -> 15.5-16.5 us, B=256 71.7 -> 58-62 (main: register-bound
#     twin), B=128 window 128 faster; B=32 (one round: no twin), B=16 and B=1 (the 16-row tile)
#     level; window 4096 B=16 (register-bound twin either way), plain B=64 8k and 32/8 q_len 8 B=4
#     32k level (+-1%: the four-warp instances, unchanged). FP8 (the eight-block twin): B=64 26.2 ->
#     18-19.5, B=256 93.3 -> 65-70; B=16 (one round: no twin) and the plain rows level.
set -uo pipefail
D=${DEADLINE:-400}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-tw/gt.xz '*Variants*:*Sinks*:*Decode*:PromisesGpu.*:AdversarialGpu.*' ${TW_LIMIT:-120}
for b in base new; do xz -dc build-tw/$b.xz > /tmp/tw-$b && chmod +x /tmp/tw-$b; done
G="--lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192"
S="--window 128,-1 --sinks"
[ $(left) -gt 60 ] && AB_TIMEOUT=30 bash scripts/ab.sh /tmp/tw-base /tmp/tw-new 2 -- \
  "-b 64 $G $S" "-b 256 $G $S" "-b 32 $G $S" "-b 16 $G $S" "-b 128 $G --window 128,-1" \
  "-b 16 $G --window 4096,-1" "-b 64 $G" "-b 4 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 32768" \
  "-b 64 $G $S --kv-format fp8" "-b 256 $G $S --kv-format fp8" "-b 16 $G $S --kv-format fp8" \
  "-b 16 $G --kv-format fp8" \
  > $OUT/tw.txt 2>&1
echo "ab $SECONDS s"; grep -A16 "^| shape" $OUT/tw.txt
echo "done $SECONDS s"
