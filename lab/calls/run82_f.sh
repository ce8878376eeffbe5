#!/usr/bin/env bash
# Run 82's patch call (for the next session): the tail-wave split rule
# (lab/patches/run82-tail-wave-splits.patch) on rows whose plan it changes, old/new/new/old:
# D=64 rows with build-ab/splitkv_wide (main's planner) against build-np/splitkv.xz (the same
# kernels, the new rule); INT4 / FP8 D=128 rows with build-bin/splitkv.xz against
# build-np/splitkv_ci.xz (CI config). Land the patch if no row is slower and the changed rows gain.
set -uo pipefail
D=${DEADLINE:-200}
xz -dc build-ab/splitkv_wide.xz > /tmp/old && xz -dc build-np/splitkv.xz > /tmp/new
xz -dc build-bin/splitkv.xz > /tmp/oldci && xz -dc build-np/splitkv_ci.xz > /tmp/newci
chmod +x /tmp/old /tmp/new /tmp/oldci /tmp/newci
ab() {  # $1: binary suffix ("" or ci); reads rows from stdin
  while read -r r; do
    [ $SECONDS -gt $D ] && break
    for c in old new new old; do echo "$c $(timeout 20 /tmp/$c$1 bench $r --iters 30 2>&1 | tail -1 | awk '{print $(NF-5), $(NF-3), $(NF-1)}')"; done | tr '\n' ' '
    echo " [$r]"
  done
}
ab "" <<'R'
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 64 --lq 2 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 32 --lq 16 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 4096
-b 64 --hq 32 --hkv 8 -d 64 --lk 8192 --kv-format fp8
R
ab ci <<'R'
-b 64 --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4
-b 16 --lq 16 --causal --hq 28 --hkv 4 -d 128 --lk 8192 --kv-format fp8
R
echo "done $SECONDS s"
