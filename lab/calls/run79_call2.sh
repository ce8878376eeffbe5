#!/usr/bin/env bash
# Run 79 call 2: the mixed route's second design (decode parts by row kind, prefill part first at
# priority). Build sm_90a bf16 D=128 (every format; CLI + GPU tests), the mixed suite (one call,
# route, separate), the mixed-route GPU tests and the rerun of the q_scale-fixed route case, then
# cuDNN's mixed parts and, with time left, the quant suite (its *_kc rows). DEADLINE in seconds.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
D=${DEADLINE:-560}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
cmake -S . -B build-d -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_HEAD_DIMS=128 -DSPLITKV_DTYPES=bf16 -DSPLITKV_BUILD_PYTHON=OFF >$OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
ninja -C build-d -j16 splitkv_cli splitkv_gpu_tests >$OUT/build.log 2>&1 || { grep -m20 -A5 error $OUT/build.log; exit 1; }
echo "build $SECONDS s"
export SPLITKV_COMMIT=${C:-run79}
timeout 150 build-d/splitkv bench --suite mixed --json $OUT/mixed-ours.json >$OUT/mixed.log 2>&1; echo "mixed rc=$? $SECONDS s"
grep -v "^ *$" $OUT/mixed.log | tail -40
G=build-d/tests/splitkv_gpu_tests
F=${FILTER:-*MixedRoute*:*DecodeVariants*:*ChunkedPrefill*:*Dequant*:*Kc*:*KC*:*Softcap*}
pids=()
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 150 $G --gtest_filter="$F" >$OUT/gtest.$i.log 2>&1 & pids+=($!)
done
for i in 0 1 2 3; do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' $OUT/gtest.$i.log | tr '\n' ' ') last: $(grep -E '^\[ RUN' $OUT/gtest.$i.log | tail -1)"; done
grep -h -E "^\[  FAILED  \].*\(" $OUT/gtest.*.log | head -20; grep -h -A4 "Failure" $OUT/gtest.*.log | head -40
echo "gtests done $SECONDS s"
T=$(( $(left) - 200 )); [ $T -gt 20 ] && { timeout $T python3 bench/peers.py --suite mixed --json $OUT/mixed-peers.json >$OUT/peers.log 2>&1; echo "peers rc=$? $SECONDS s"; tail -3 $OUT/peers.log; }
python3 bench/merge_results.py --suite mixed --ours $OUT/mixed-ours.json --peers $OUT/mixed-peers.json --out $OUT >/dev/null 2>&1 && cat $OUT/mixed-latest.md
T=$(( $(left) - 5 )); [ $T -gt 30 ] && { timeout $T build-d/splitkv bench --suite quant --json $OUT/quant-ours.json >$OUT/quant.log 2>&1; echo "quant rc=$? $SECONDS s"; grep -E "kc|INT4|K8V4" $OUT/quant.log | tail -30; }
echo "done $SECONDS s"
