#!/usr/bin/env bash
# Run 84, call C: the variants instance's register-bound twin, launched where it saves a round of
# blocks (Plan::register_bound_blocks), against main (build-np2/splitkv_w.xz, wide config, the
# unbound instance) on the gpt-oss rows: B=128 and 256 q_len 4 take the twin (4 -> 3 and 8 -> 6
# rounds), B=1/16/64 keep the plain instance, q_len 1 and the plain rows are other instances.
# New: build-np4/splitkv_rb.xz (D=64 bf16, sm_90a). Then its variants and sinks GPU tests.
# Prediction: B=256 86.5 -> ~72.5 us (call A's bound build), B=128 ~-15%, the rest level.
set -uo pipefail
D=${DEADLINE:-200}
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np2/splitkv_w.xz > /tmp/old && xz -dc build-np4/splitkv_rb.xz > /tmp/new && chmod +x /tmp/old /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--causal --hq 64 --hkv 8 -d 64 --lk 8192"
while read -r r; do
  [ $SECONDS -gt $D ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<R
-b 256 --lq 4 $G --window 128,-1 --sinks
-b 128 --lq 4 $G --window 128,-1 --sinks
-b 64 --lq 4 $G --window 128,-1 --sinks
-b 16 --lq 4 $G --window 128,-1 --sinks
-b 1 --lq 4 $G --window 128,-1 --sinks
-b 256 --lq 4 $G --window 4096,-1 --sinks
-b 256 --lq 4 $G
-b 64 --lq 4 $G
-b 256 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
-b 256 --lq 4 $G --window 128,-1 --softcap 30
R
/tmp/new plan -b 256 --lq 4 $G --window 128,-1 --sinks | grep -E "tile|splits"
/tmp/new plan -b 64 --lq 4 $G --window 128,-1 --sinks | grep -E "tile|splits"
if [ -f build-np4/splitkv_gpu_tests.xz ]; then
  bash lab/calls/gpu_test_shards.sh build-np4/splitkv_gpu_tests.xz '*Variants*:*Sinks*' 150
fi
echo "done $SECONDS s"
