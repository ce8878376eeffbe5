#!/usr/bin/env bash
# Run 82, call F: the tail-wave split rule (choose_tail_splits) on rows whose plan it changes:
# build-ab/splitkv_wide (main's planner) against build-np/ (the same kernels, the new rule).
set -uo pipefail
D=${DEADLINE:-100}
xz -dc build-ab/splitkv_wide.xz > /tmp/old && xz -dc build-np/splitkv.xz > /tmp/new && chmod +x /tmp/old /tmp/new
while read -r r; do
  [ $SECONDS -gt $D ] && break
  for c in old new new old; do echo "$c $(timeout 20 /tmp/$c bench $r --iters 30 2>&1 | tail -1 | awk '{print $(NF-5), $(NF-3), $(NF-1)}')"; done | tr '\n' ' '
  echo " [$r]"
done <<'R'
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 64 --lq 2 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 32 --lq 16 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 4096
-b 64 --hq 32 --hkv 8 -d 64 --lk 8192 --kv-format fp8
-b 16 --lq 16 --causal --hq 28 --hkv 4 -d 128 --lk 8192 --kv-format fp8
R
echo "done $SECONDS s"
