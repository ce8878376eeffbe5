#!/usr/bin/env bash
# Run 86, call A (any H100/H200; carry [".deps"]; builds on the device): FP8 at D=64 with four
# resident blocks per SM (lab/patches/run85-fp8-d64-four-blocks.patch: a 6-stage ring, 51.2 KB,
# __launch_bounds__(128, 4): 124/128/124 registers, no spill; the 8-row kernel 119-121) against
# main, both sm_90a bf16 D=64 native + FP8 CLIs built here in parallel, then the patch's GPU tests
# (decode quant, variants, sinks, promises) in 4 shards. new3: the same with 3 stages in flight.
# Prediction: gpt-oss FP8 window 128 + sinks q_len 4 B=256 (4096 16-row blocks: 11 rounds of 396
# slots -> 8 of 528) 89.9 -> 70-78 us, B=64 25.6 -> 22-24; q_len 1 (8-row blocks) B=256 32.1 ->
# 27-30; long FP8 rows (the same bytes in flight per SM) within +-3%.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/nw && tar --exclude='./build*' --exclude=./.git -cf - . | (cd /tmp/nw && tar xf -)
(cd /tmp/nw && patch -p1 -s < lab/patches/run85-fp8-d64-four-blocks.patch) || exit 1
# A second variant: the same four blocks with 3 of the 6 stages in flight (96 KB per SM, under the
# ~100 KB the 8-bit formats at D=128 measured best with).
cp -r /tmp/nw /tmp/nw3
sed -i 's/^  t.reserved_stages = t.stages;$/  t.reserved_stages = t.stages;\n  if (four_blocks) t.stages = 4;/' /tmp/nw3/src/kernels/decode_quant/decode_quant_tile.hpp
grep -q "if (four_blocks) t.stages = 4;" /tmp/nw3/src/kernels/decode_quant/decode_quant_tile.hpp || exit 1
cfg() { cmake -S "$1" -B "$1/build-a" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_PYTHON=OFF -DSPLITKV_HEAD_DIMS=64 -DSPLITKV_DTYPES=bf16 "-DSPLITKV_KV_FORMATS=native;fp8" >/dev/null; }
cfg . && cfg /tmp/nw && cfg /tmp/nw3 || exit 1
ninja -C build-a -j5 splitkv_cli >/tmp/b1.log 2>&1 & p1=$!
ninja -C /tmp/nw/build-a -j7 splitkv_cli splitkv_gpu_tests >/tmp/b2.log 2>&1 & p2=$!
ninja -C /tmp/nw3/build-a -j4 splitkv_cli >/tmp/b3.log 2>&1 & p3=$!
wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?
echo "build rc $r1 $r2 $r3 $SECONDS s"; [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -20 /tmp/b1.log /tmp/b2.log; exit 1; }
cp build-a/splitkv /tmp/old; cp /tmp/nw/build-a/splitkv /tmp/new; cp /tmp/nw3/build-a/splitkv /tmp/new3 2>/dev/null
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--hq 64 --hkv 8 -d 64 --kv-format fp8"
while read -r r; do
  [ $SECONDS -gt 380 ] && break
  echo "old $(t old "$r") new $(t new "$r") new3 $(t new3 "$r") new3 $(t new3 "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<R
-b 256 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks
-b 64 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks
-b 256 --lq 1 $G --lk 8192 --window 128,-1 --sinks
-b 64 --lq 1 $G --lk 8192 --window 128,-1 --sinks
-b 16 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks
-b 64 --lq 1 $G --lk 8192
-b 16 --lq 1 $G --lk 32768
-b 64 --lq 4 --causal $G --lk 8192
-b 16 --lq 4 --causal --hq 32 --hkv 32 -d 64 --kv-format fp8 --lk 8192
-b 1 --lq 1 $G --lk 8192
R
xz -T16 -c /tmp/nw/build-a/tests/splitkv_gpu_tests > /tmp/gt.xz
bash lab/calls/gpu_test_shards.sh /tmp/gt.xz '*Quant*:*Variants*:*Sinks*:*Promise*:DecodeGpu.*' 120
echo "done $SECONDS s"
