#!/usr/bin/env bash
# Run 87, call A (any H100/H200; carry [".deps"]; builds on the device): INT4's 8-row block at D=64
# bound for four resident blocks (lab/patches/run86-int4-d64-n8-four-blocks.patch: plain 120,
# window 128 registers, no spill; the capped instance kept at three, 157) against main, sm_90a bf16
# D=64 native + INT4 CLIs built here in parallel, then the patch's GPU tests (D=64 and 128).
# Prediction (from FP8's 8-row block, run 86): INT4 D=64 q_len 1 window rows 10-25% faster (the
# window instance held three blocks by its 140 registers); plain and capped rows level (their
# bounds do not change; shared memory already held four).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/nw && tar --exclude='./build*' --exclude=./.git -cf - . | (cd /tmp/nw && tar xf -)
(cd /tmp/nw && patch -p1 -s < lab/patches/run86-int4-d64-n8-four-blocks.patch) || exit 1
cfg() { cmake -S "$1" -B "$1/build-a" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_PYTHON=OFF "-DSPLITKV_HEAD_DIMS=$2" -DSPLITKV_DTYPES=bf16 "-DSPLITKV_KV_FORMATS=native;int4" >/dev/null; }
cfg . 64 && cfg /tmp/nw "64;128" || exit 1
ninja -C build-a -j5 splitkv_cli >/tmp/b1.log 2>&1 & p1=$!
ninja -C /tmp/nw/build-a -j11 splitkv_cli splitkv_gpu_tests >/tmp/b2.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build rc $r1 $r2 $SECONDS s"; [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -20 /tmp/b1.log /tmp/b2.log; exit 1; }
G="--hq 64 --hkv 8 -d 64 --kv-format int4"
AB_TIMEOUT=30 bash scripts/ab.sh build-a/splitkv /tmp/nw/build-a/splitkv 2 -- \
  "-b 256 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192 --window 128,-1 --sinks" \
  "-b 1 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192 --window 4096,-1" \
  "-b 16 --lq 1 $G --lk 32768 --window 4096,-1" "-b 64 --lq 1 $G --lk 8192" "-b 64 --lq 1 $G --lk 8192 --softcap 30" \
  "-b 16 --lq 4 --causal --hq 32 --hkv 32 -d 64 --kv-format int4 --lk 8192 --window 1000,-1" 2>&1 | tail -11
xz -T16 -c /tmp/nw/build-a/tests/splitkv_gpu_tests > /tmp/gt.xz
bash lab/calls/gpu_test_shards.sh /tmp/gt.xz '*Quant*:*Variants*:*Sinks*:PromisesGpu.*:DecodeGpu.*:AdversarialGpu.*' 150
echo "done $SECONDS s"
