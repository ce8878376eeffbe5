#!/usr/bin/env bash
# Run 86, call E: run86_d.sh with binaries built on this machine (carry [".deps", "build-src"];
# build-src/bins/{old,new,gt}.xz: main's sm_90a D=64 bf16 native + FP8 CLI, the tree's CLI and its
# GPU tests at D=64 and 128). Same rows, prediction and tests as run86_d.sh, and the adversarial
# suite under memcheck.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
for b in old new gt; do xz -dc build-src/bins/$b.xz > /tmp/$b && chmod +x /tmp/$b || exit 1; done
/tmp/new plan -b 64 --lq 1 --hq 64 --hkv 8 -d 64 --kv-format fp8 --lk 8192 2>&1 | grep -iE "kernel|stages|block" | head -4
G="--hq 64 --hkv 8 -d 64 --kv-format fp8"
AB_TIMEOUT=30 bash scripts/ab.sh /tmp/old /tmp/new 2 -- \
  "-b 256 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192 --window 128,-1 --sinks" \
  "-b 1 --lq 1 $G --lk 8192 --window 128,-1 --sinks" "-b 64 --lq 1 $G --lk 8192" "-b 16 --lq 1 $G --lk 32768" \
  "-b 1 --lq 1 $G --lk 8192" "-b 8 --lq 1 $G --lk 131072" "-b 16 --lq 4 --causal --hq 32 --hkv 32 -d 64 --kv-format fp8 --lk 8192" \
  "-b 256 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks" "-b 16 --lq 4 --causal $G --lk 8192 --window 128,-1 --sinks" \
  "-b 64 --lq 1 $G --lk 8192 --softcap 30" 2>&1 | tail -14
# The adversarial suite under compute-sanitizer memcheck (zero errors is part of the promise), beside the shards.
(timeout 170 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt --gtest_filter='AdversarialGpu.*' > /tmp/mc.log 2>&1; echo "memcheck rc=$?" >> /tmp/mc.log) & mc=$!
xz -T16 -c /tmp/gt > /tmp/gt.xz
bash lab/calls/gpu_test_shards.sh /tmp/gt.xz 'AdversarialGpu.*:PromisesGpu.*:*Variants*:*Sinks*:*Quant*:DecodeGpu.*' 150
wait $mc; grep -E "ERROR SUMMARY|PASSED|FAILED|memcheck rc|adversarial" /tmp/mc.log | head -8
echo "done $SECONDS s"
