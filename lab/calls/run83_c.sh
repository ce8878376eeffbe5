#!/usr/bin/env bash
# Run 83, call C: the tail-wave split rule, second design (choose_tail_splits: the fewest splits that
# fill the slots to 95%, only for blocks bound by the memory: 16-bit caches and the 8-row quantized
# tiles), on the shapes it changes, interleaved old/new/new/old. Wide config (D=64, FP8):
# build-ab/splitkv_wide.xz (main) against build-np2/splitkv_w.xz; CI config (INT4 D=128):
# build-bin/splitkv.xz (HEAD) against build-np2/splitkv_ci.xz.
set -uo pipefail
D=${DEADLINE:-300}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
xz -dc build-ab/splitkv_wide.xz > /tmp/old && xz -dc build-np2/splitkv_w.xz > /tmp/new
xz -dc build-bin/splitkv.xz > /tmp/oldci && xz -dc build-np2/splitkv_ci.xz > /tmp/newci
chmod +x /tmp/old /tmp/new /tmp/oldci /tmp/newci
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
s() { /tmp/$1 plan $2 2>&1 | awk '/^splits:/{print $2}'; }
row() {  # old new: the two CLIs; the shape
  local o=$1 n=$2; shift 2; local r="$*"
  echo "$(s $o "$r")->$(s $n "$r") splits | $o $(t $o "$r") $n $(t $n "$r") $n $(t $n "$r") $o $(t $o "$r") | $r"
}
while read -r r; do
  [ $SECONDS -gt $D ] && break; row old new $r
done <<'R'
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 32768
-b 64 --lq 2 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 64 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 32 --lq 16 --causal --hq 32 --hkv 8 -d 64 --lk 8192
-b 128 --lq 4 --causal --hq 28 --hkv 4 -d 64 --lk 8192
-b 16 --lq 8 --causal --hq 32 --hkv 32 -d 64 --lk 8192
-b 64 --hq 32 --hkv 8 -d 64 --lk 8192 --kv-format fp8
-b 64 --hq 64 --hkv 8 -d 64 --lk 32768 --kv-format fp8
-b 16 --lq 4 --causal --hq 32 --hkv 32 -d 64 --lk 8192 --kv-format fp8
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 64 --lk 4096
-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks
R
while read -r r; do
  [ $SECONDS -gt $D ] && break; row oldci newci $r
done <<'R'
-b 64 --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4
-b 64 --hq 32 --hkv 8 -d 128 --lk 32768 --kv-format int4
-b 16 --lq 4 --causal --hq 32 --hkv 32 -d 128 --lk 8192 --kv-format int4
-b 32 --lq 8 --causal --hq 16 --hkv 16 -d 128 --lk 8192 --kv-format int4
-b 64 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --kv-format int4
R
# Where the gpt-oss window row's time goes: kernels of one bench call under ncu (ns).
if [ $SECONDS -lt $((D + 40)) ] && command -v ncu >/dev/null; then
  timeout 60 ncu -c 40 --metrics gpu__time_duration.sum --csv /tmp/new bench -b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 \
    --lk 8192 --window 128,-1 --sinks --iters 3 2>/dev/null | awk -F'","' 'NR>1{print $5, $NF}' | sort | uniq -c | sort -rn | head -8
fi
echo "done $SECONDS s"
