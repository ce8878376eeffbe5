#!/usr/bin/env bash
# Run 86, call B (any H100/H200; carry [".deps"]; builds on the device): (1) main's new GPU promise
# test (PromisesGpu.AWindowReadsNoPageBeforeItsStartEdge), the variants tests and the adversarial
# suite (its random bases now carry windows, softcaps and sinks); (2) the window
# edge for every split (lab/patches/run85-window-edge-every-split.patch: the 16-key edge for
# several splits and batch-invariant splits too) with the same tests, and an A/B against main on
# multi-split window rows. Both sm_90a bf16 D=128 native + FP8 + INT4, CLI and GPU tests.
# Predictions: (1) passes (the CPU side does); (2) passes; rows level (+-1%): the first split loses
# at most 48 keys of a masked sub-tile.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/we && tar --exclude='./build*' --exclude=./.git -cf - . | (cd /tmp/we && tar xf -)
(cd /tmp/we && patch -p1 -s < lab/patches/run85-window-edge-every-split.patch) || exit 1
cfg() { cmake -S "$1" -B "$1/build-b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_PYTHON=OFF -DSPLITKV_HEAD_DIMS=128 -DSPLITKV_DTYPES=bf16 "-DSPLITKV_KV_FORMATS=native;fp8;int4" >/dev/null; }
cfg . && cfg /tmp/we || exit 1
ninja -C build-b -j8 splitkv_cli splitkv_gpu_tests >/tmp/b1.log 2>&1 & p1=$!
ninja -C /tmp/we/build-b -j8 splitkv_cli splitkv_gpu_tests >/tmp/b2.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build rc $r1 $r2 $SECONDS s"; [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -20 /tmp/b1.log /tmp/b2.log; exit 1; }
F='PromisesGpu.*:*Variants*:*Sinks*:*Adversarial*'
for side in main:build-b/tests/splitkv_gpu_tests patch:/tmp/we/build-b/tests/splitkv_gpu_tests; do
  xz -T16 -c ${side#*:} > /tmp/gt-${side%%:*}.xz
  echo "== tests ${side%%:*}"; bash lab/calls/gpu_test_shards.sh /tmp/gt-${side%%:*}.xz "$F" 100
done
cp build-b/splitkv /tmp/old; cp /tmp/we/build-b/splitkv /tmp/new
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
while read -r r; do
  [ $SECONDS -gt 500 ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done <<'R'
-b 1 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 128,-1
-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 128,-1
-b 1 --lq 1 --hq 32 --hkv 8 -d 128 --lk 131072 --window 4096,-1
-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 4096,-1
-b 1 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --window 128,-1 --sinks
-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 1000,-1 --kv-format int4
R
echo "done $SECONDS s"
