#!/usr/bin/env bash
# Run 84, call A (next session): lab/patches/run83-decode-d64-launch-bounds.patch, decode_kernel's
# register bound at D=64 (three blocks per SM, what its shared memory allows and the planner
# counts on). Unbounded, the 32-row variants instance takes 196 registers: two blocks per SM, so
# the gpt-oss window + sinks q_len 4 rows (512 blocks) run 1.94 waves where the planner counts
# 1.29. With the bound: 168 registers, 2 spill stores before the key loop, 2 loads in a branch of
# it; the plain 32-row instance 166 -> 168 with the same 2+2. Old: build-np2/splitkv_w.xz (main's
# planner for 16-bit rows); new: build-np3/splitkv_lb.xz (HEAD + patch), both wide config.
# Then the D=64 GPU tests with the patch (build-np3/splitkv_gpu_tests_d64.xz, if packed), and
# FlexAttention on B=64 64/8 D=64 q_len 4 bf16 (the tail rule's row) and its window + sinks twin.
set -uo pipefail
D=${DEADLINE:-240}
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np2/splitkv_w.xz > /tmp/old && xz -dc build-np3/splitkv_lb.xz > /tmp/new && chmod +x /tmp/old /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
while read -r r; do
  [ $SECONDS -gt $D ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<'R'
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 256 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 16 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 1 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 16 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 256 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 8 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 32768 --softcap 50
-b 32 --lq 16 --causal --hq 32 --hkv 8 -d 64 --lk 8192
R
if [ -f build-np3/splitkv_gpu_tests_d64.xz ] && [ $SECONDS -lt $((D + 60)) ]; then
  bash lab/calls/gpu_test_shards.sh build-np3/splitkv_gpu_tests_d64.xz '*Decode*:*Variants*:*Sinks*'
fi
if [ $SECONDS -lt 480 ]; then  # FlexAttention on the tail rule's row and its window + sinks twin
  timeout $(( 560 - SECONDS )) python3 bench/peers_flex.py --suite variants --filter "B=64 Lk=8192 64/8 q_len=4 D=64 bf16" \
    --json $OUT/flex-b64-q4.json --max-seconds $(( 530 - SECONDS )) >/tmp/flex.log 2>&1
  echo "flex rc=$? $SECONDS s"; grep -E "flex|us" /tmp/flex.log | tail -4 | cut -c1-160
fi
echo "done $SECONDS s"
