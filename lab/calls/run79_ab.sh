#!/usr/bin/env bash
# Run 79: the prefill suite (then the strategies suite) A/B, old = ebce4af (prefill-latest's
# commit), new = main, both built on the CPU machine (sm_90a, D 64/128/256, fp16/bf16,
# native/int8/int4, CLI only) and carried xz'd in build-ab/. Interleaved: old, new, new, old.
set -uo pipefail
D=${DEADLINE:-570}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for x in base new; do xz -dc build-ab/splitkv_$x.xz > /tmp/splitkv_$x && chmod +x /tmp/splitkv_$x; done
run() {  # binary suite tag
  local T=$(( D - SECONDS - ${4:-0} )); [ $T -lt 30 ] && { echo "skip $3: no time"; return; }
  SPLITKV_COMMIT=$1 timeout $T /tmp/splitkv_$1 bench --suite $2 --json $OUT/$2-$3.json >$OUT/$2-$3.log 2>&1
  echo "$2 $3 rc=$? at $SECONDS s"
}
run base prefill old1 330
run new prefill new1 240
run new prefill new2 150
run base prefill old2 60
run new strategies new1 30
run base strategies old1 0
echo "done $SECONDS s"
