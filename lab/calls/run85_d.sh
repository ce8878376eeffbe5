#!/usr/bin/env bash
# Run 85, call D (warm after call C; carry [".deps"]): run85_b.sh built on the device: main +
# lab/patches/run84-window-start-subtile-edge.patch (sm_90a, bf16, D=64, native + FP8, CLI and GPU
# tests) against call C's main CLI (build-c/splitkv), then the patch's GPU tests in 4 shards, then
# the variants rows that read below variants-latest in call C, timed again (spread).
# Prediction: as run85_b.sh (window 128 + sinks rows at B >= 64 5-10% faster, others level).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
[ -x build-c/splitkv ] || { echo "no build-c: run run85_c.sh first"; exit 1; }
mkdir -p /tmp/ws && tar --exclude='./build*' --exclude=./.git -cf - . | (cd /tmp/ws && tar xf -)
(cd /tmp/ws && patch -p1 -s < lab/patches/run84-window-start-subtile-edge.patch) || exit 1
cmake -S /tmp/ws -B /tmp/ws/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_PYTHON=OFF -DSPLITKV_HEAD_DIMS=64 -DSPLITKV_DTYPES=bf16 "-DSPLITKV_KV_FORMATS=native;fp8" >/dev/null || exit 1
ninja -C /tmp/ws/build -j16 splitkv_cli splitkv_gpu_tests >/tmp/b3.log 2>&1 || { grep -m10 -A5 error /tmp/b3.log; exit 1; }
echo "build $SECONDS s"
cp build-c/splitkv /tmp/old; cp /tmp/ws/build/splitkv /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--hq 64 --hkv 8 -d 64 --lk 8192"
while read -r r; do
  [ $SECONDS -gt 300 ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<R
-b 64 --lq 4 --causal $G --window 128,-1 --sinks
-b 256 --lq 4 --causal $G --window 128,-1 --sinks
-b 16 --lq 4 --causal $G --window 128,-1 --sinks
-b 64 --lq 1 $G --window 128,-1 --sinks
-b 256 --lq 1 $G --window 128,-1 --sinks
-b 64 --lq 1 $G --window 128,-1 --sinks --kv-format fp8
-b 64 --lq 4 --causal $G
-b 16 --lq 4 --causal $G --window 4096,-1
-b 1 --lq 4 --causal $G --window 128,-1 --sinks
R
xz -T16 -c /tmp/ws/build/tests/splitkv_gpu_tests > /tmp/gt.xz
bash lab/calls/gpu_test_shards.sh /tmp/gt.xz '*Variants*:*Sinks*:DecodeGpu.*:Cases/DecodeVsReference.*:*Adversarial*:*Promise*' 120
echo "tests $SECONDS s"
for i in 1 2 3; do
  [ $SECONDS -gt 540 ] && break
  echo "B=8 D=128 w128 32k: $(t old '-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 128,-1')  B=1 q4 gpt-oss: $(t old "-b 1 --lq 4 --causal $G --window 128,-1 --sinks")"
done
echo "done $SECONDS s"
