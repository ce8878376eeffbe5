#!/usr/bin/env bash
# Run 87, call B (any H100/H200; carry [".deps"]; builds on the device): the window split-span helper
# (lab/patches/run86-window-split-span-helper.patch: one window_split_span for decode_key_range, the
# L2 prefetch and the CPU backend; same semantics, but the variants instances' prologue schedules
# differently, +8 SASS instructions in decode_mma's window instance) against main on short window
# rows, where run 85's bisect saw prologue changes cost ~0.3 us; then the patch's variants tests.
# sm_90a bf16 D=64 and 128 native CLIs. Prediction: level (+-1%); land only if so.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/nw && tar --exclude='./build*' --exclude=./.git -cf - . | (cd /tmp/nw && tar xf -)
(cd /tmp/nw && patch -p1 -s < lab/patches/run86-window-split-span-helper.patch) || exit 1
cfg() { cmake -S "$1" -B "$1/build-b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_PYTHON=OFF "-DSPLITKV_HEAD_DIMS=64;128" -DSPLITKV_DTYPES=bf16 -DSPLITKV_KV_FORMATS=native >/dev/null; }
cfg . && cfg /tmp/nw || exit 1
ninja -C build-b -j6 splitkv_cli >/tmp/b1.log 2>&1 & p1=$!
ninja -C /tmp/nw/build-b -j10 splitkv_cli splitkv_gpu_tests >/tmp/b2.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build rc $r1 $r2 $SECONDS s"; [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -20 /tmp/b1.log /tmp/b2.log; exit 1; }
AB_TIMEOUT=30 bash scripts/ab.sh build-b/splitkv /tmp/nw/build-b/splitkv 3 -- \
  "-b 1 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --window 128,-1 --sinks" \
  "-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 128,-1" \
  "-b 1 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 128,-1" \
  "-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 4096,-1" \
  "-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks" \
  "-b 64 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks" 2>&1 | tail -9
xz -T16 -c /tmp/nw/build-b/tests/splitkv_gpu_tests > /tmp/gt.xz
bash lab/calls/gpu_test_shards.sh /tmp/gt.xz '*Variants*:*Sinks*:PromisesGpu.*' 120
echo "done $SECONDS s"
