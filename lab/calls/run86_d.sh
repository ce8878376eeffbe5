#!/usr/bin/env bash
# Run 86, call D (any H100/H200; before it: mkdir -p build-src && git archive -o build-src/src_main.tgz
# HEAD; carry [".deps", "build-src"]; builds on the device): four resident blocks for FP8's 8-row
# block at D=64 only (run86_a: the 16-row block lost at four, the 8-row block gained), 4 of 6
# stages in flight; and the adversarial harness uploading an attack's own page table. Main (the
# archive) against the working tree, sm_90a D=64 bf16 native + FP8 CLIs; the tree's GPU tests at
# D=64 and 128 (the adversarial suite needs bf16 D=128).
# Prediction (run86_a's new3 column): q_len 1 gpt-oss FP8 rows B=256 32.2 -> 27.5, B=64 12.5 -> 9.0;
# long q_len 1 rows 5-15% faster; q_len 4 gpt-oss rows (16-row block) level; all tests pass.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/base && tar xzf build-src/src_main.tgz -C /tmp/base && ln -sfn $PWD/.deps /tmp/base/.deps
cfg() { cmake -S "$1" -B "$1/build-d" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_PYTHON=OFF "-DSPLITKV_HEAD_DIMS=$2" -DSPLITKV_DTYPES=bf16 "-DSPLITKV_KV_FORMATS=native;fp8" >/dev/null; }
cfg /tmp/base 64 && cfg . "64;128" || exit 1
ninja -C /tmp/base/build-d -j5 splitkv_cli >/tmp/b1.log 2>&1 & p1=$!
ninja -C build-d -j11 splitkv_cli splitkv_gpu_tests >/tmp/b2.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build rc $r1 $r2 $SECONDS s"; [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -20 /tmp/b1.log /tmp/b2.log; exit 1; }
./build-d/splitkv plan -b 64 --lq 1 --hq 64 --hkv 8 -d 64 --kv-format fp8 --lk 8192 2>&1 | grep -iE "kernel|stages|block" | head -4
G="--hq 64 --hkv 8 -d 64 --kv-format fp8"
AB_TIMEOUT=30 bash scripts/ab.sh /tmp/base/build-d/splitkv build-d/splitkv 2 -- \
  "-b 256 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192 --window 128,-1 --sinks" \
  "-b 1 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192" "-b 16 --lq 1 $G --lk 32768" \
  "-b 1 --lq 1 $G --lk 8192" "-b 8 --lq 1 $G --lk 131072" "-b 16 --lq 4 --causal --hq 32 --hkv 32 -d 64 --kv-format fp8 --lk 8192" \
  "-b 256 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks" \
  "-b 16 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 4 --causal $G --lk 8192" \
  "-b 64 --lq 1 $G --lk 8192 --softcap 30" 2>&1 | tail -16
xz -T16 -c build-d/tests/splitkv_gpu_tests > /tmp/gt.xz
bash lab/calls/gpu_test_shards.sh /tmp/gt.xz 'AdversarialGpu.*:PromisesGpu.*:*Variants*:*Sinks*:*Quant*:DecodeGpu.*' 150
echo "done $SECONDS s"
