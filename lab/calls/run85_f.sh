#!/usr/bin/env bash
# Run 85, call F (any H100/H200; carry ["build-r85"]): main at 1f7f7f4 (both run-84 patches landed)
# in the CI configuration (sm_80 + sm_90a, bf16, D=128, every format): (1) the decode, variants,
# sinks and adversarial GPU tests, with the new one-split window cases; (2) the D=64 GPU tests'
# register-bound twin case under compute-sanitizer (memcheck; build-r85/gpu_tests_d64.xz: sm_90a
# bf16 D=64 native + FP8, the window-edge patch); (3) A/B c6df5a8 -> main on the INT4 D=128
# 16-row variants rows whose splits go 3 -> 1 (registers' 264 slots), and two controls.
# (4) the bisect of call E's regression on short split rows.
# Predictions: (1)-(2) pass, no sanitizer error; (3) level or faster (the 3 splits were a second
# round of 16-row blocks at two per SM).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-r85/gpu_tests_ci.xz '*Variants*:*Sinks*:DecodeGpu.*:Cases/DecodeVsReference.*:*Adversarial*:*Promise*:*Window*' 150
echo "tests $SECONDS s"
xz -dc build-r85/gpu_tests_d64.xz > /tmp/gt64 && chmod +x /tmp/gt64
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 7 /tmp/gt64 --gtest_filter='DecodeVariantsGpu.TheRegisterBoundTwin*:*gpt_oss*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|OK \]" | head -8
echo "sanitizer rc=${PIPESTATUS[0]} $SECONDS s"
xz -dc build-r85/splitkv_c6df5a8.xz > /tmp/old; xz -dc build-r85/splitkv_new_ci.xz > /tmp/new; chmod +x /tmp/old /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
while read -r r; do
  [ $SECONDS -gt 330 ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
  echo "   old: $(/tmp/old plan $r | grep -E '^(splits|tile)' | cut -c1-50 | tr '\n' ' ') new: $(/tmp/new plan $r | grep -E '^(splits|tile)' | cut -c1-50 | tr '\n' ' ')"
done <<'R'
-b 32 --lq 4 --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4 --causal --softcap 30
-b 32 --lq 4 --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4 --causal --window 4096,-1
-b 32 --lq 4 --hq 28 --hkv 4 -d 128 --lk 32768 --kv-format int4 --causal --softcap 30
-b 16 --lq 4 --hq 64 --hkv 8 -d 128 --lk 32768 --kv-format int4 --causal --window 4096,-1
-b 32 --lq 4 --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4 --causal
-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --kv-format int4_kc
R
echo "ab done $SECONDS s"
# The bisect of call E's regression (B=8 32/8 D=128 q_len 1 window 128: 6.80 us at 1c46349, 7.10 at
# c6df5a8, H100): D=128 bf16 native CLIs of commits between, in history order, two rounds.
R1="-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 128,-1"
R2="-b 1 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --window 128,-1 --sinks"
for c in 1c46349 2f4bcb4 316f85c cf215ad 36400b5 6a3023e; do
  [ -f build-r85/splitkv_$c.xz ] && xz -dc build-r85/splitkv_$c.xz > /tmp/$c && chmod +x /tmp/$c
done
cp /tmp/old /tmp/c6df5a8; cp /tmp/new /tmp/main
for round in 1 2; do
  for c in 1c46349 2f4bcb4 316f85c cf215ad 36400b5 6a3023e c6df5a8 main; do
    [ -x /tmp/$c ] || continue; [ $SECONDS -gt 560 ] && break
    echo "round $round $c $(t $c "$R1") $(t $c "$R2")"
  done
done
echo "done $SECONDS s"
