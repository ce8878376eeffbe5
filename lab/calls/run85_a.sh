#!/usr/bin/env bash
# Run 85, call A (next session; any H100 or H200): the split rules over the blocks the launched
# instance's registers hold (lab/patches/run84-splits-over-register-slots.patch) against main, on
# INT4 D=64 rows whose splits change (main fills 528 slots, 4 per SM by shared memory, where the
# registers hold 3: 396). New: build-np7/splitkv_q_new.xz, old: build-np7/splitkv_q_old.xz (both
# sm_90a bf16 D=64, native + INT8/INT4/K8V4 + *_kc; the old one is main at 1a55fde).
# Prediction: rows that gain splits (512 work units: 1.29 waves of 396 -> the tail rule's 3
# splits) run faster where the INT4 8-row blocks are memory-bound (as the tail rule measured at
# D=128); 16-row rows that lose splits are level or faster. Then check_residency's plans print.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np7/splitkv_q_old.xz > /tmp/old && xz -dc build-np7/splitkv_q_new.xz > /tmp/new && chmod +x /tmp/old /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
while read -r r; do
  [ $SECONDS -gt 240 ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
  echo "   splits old: $(/tmp/old plan $r | grep ^splits | cut -c1-60) new: $(/tmp/new plan $r | grep ^splits | cut -c1-60)"
done <<'R'
-b 128 --lq 1 --hq 28 --hkv 4 -d 64 --lk 8192 --kv-format int4 --softcap 30
-b 32 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4 --softcap 30
-b 16 --lq 4 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4 --causal
-b 16 --lq 8 --hq 32 --hkv 8 -d 64 --lk 32768 --kv-format int4 --causal
-b 32 --lq 4 --hq 32 --hkv 8 -d 64 --lk 8192 --kv-format int4 --causal
-b 32 --lq 2 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4 --causal
-b 32 --lq 4 --hq 28 --hkv 4 -d 64 --lk 32768 --kv-format int4 --causal
-b 64 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4
R
echo "done $SECONDS s"
