#!/usr/bin/env bash
# Run 79 (written in run 78), one call: build (sm_90a, bf16, D=128, every format, CLI + GPU tests + Python module), the
# mixed suite (with the mixed route), the GPU tests in 4 shards, cuDNN's mixed parts, torch GPU tests.
#   DEADLINE=430 LEAN=1: fit a shorter call (no Python module; the new code's GPU tests only).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
S=$SECONDS
D=${DEADLINE:-590}
left() { echo $(( D * ${1:-590} / 590 - SECONDS )); }
PY="-DSPLITKV_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(command -v python3)"; PYT=_splitkv
if [ -n "${LEAN:-}" ]; then
  PY="-DSPLITKV_BUILD_PYTHON=OFF"; PYT=""
  FILTER=${FILTER:-*MixedRoute*:*Sinks*:*PrefillVariants*:*DecodeVariants*:*ChunkedPrefill*:*Paged*}
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
cmake -S . -B build-d -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_HEAD_DIMS=128 -DSPLITKV_DTYPES=bf16 \
  $PY >$OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
ninja -C build-d -j16 splitkv_cli splitkv_gpu_tests $PYT >$OUT/build.log 2>&1 || { grep -m20 -A5 error $OUT/build.log; tail -20 $OUT/build.log; exit 1; }
echo "build $((SECONDS-S)) s"
export SPLITKV_COMMIT=${C:-run78}
timeout 150 build-d/splitkv bench --suite mixed --json $OUT/mixed-ours.json >$OUT/mixed.log 2>&1; echo "mixed rc=$? $((SECONDS-S)) s"
grep -v "^ *$" $OUT/mixed.log | tail -40
G=build-d/tests/splitkv_gpu_tests
T=$(( $(left 440) )); [ $T -lt 30 ] && T=30
pids=()
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $T $G --gtest_filter="${FILTER:-*}" >$OUT/gtest.$i.log 2>&1 & pids+=($!)
done
for i in 0 1 2 3; do wait ${pids[$i]}; echo "shard $i rc=$? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+' $OUT/gtest.$i.log | tr '\n' ' ') skipped $(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)' $OUT/gtest.$i.log) last: $(grep -E '^\[ RUN' $OUT/gtest.$i.log | tail -1)"; done
grep -h -E "^\[  FAILED  \].*\(" $OUT/gtest.*.log | head -30
grep -h -A4 "Failure" $OUT/gtest.*.log | head -60
echo "gtests done $((SECONDS-S)) s"
T=$(left 520); [ $T -gt 20 ] && timeout $T python3 bench/peers.py --suite mixed --json $OUT/mixed-peers.json >$OUT/peers.log 2>&1; echo "peers rc=$? $((SECONDS-S)) s"
python3 bench/merge_results.py --suite mixed --ours $OUT/mixed-ours.json --peers $OUT/mixed-peers.json --out $OUT >/dev/null 2>&1 && cat $OUT/mixed-latest.md
export PYTHONPATH=build-d/python:python SPLITKV_CLI=build-d/splitkv
T=$(left 585); [ $T -gt 15 ] && timeout $T python3 -m pytest -q -p no:cacheprovider -x tests/python/test_torch_gpu.py tests/python/test_torch_variants.py -k "not compile" >$OUT/pytest.log 2>&1; echo "pytest rc=$? $((SECONDS-S)) s"; tail -8 $OUT/pytest.log
