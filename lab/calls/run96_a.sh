#!/usr/bin/env bash
# Run 96, call A (run 95 call E, with the invariance test split by mate from build-r96): the
# final-rows-only epilogue and 32-bit item math (lab/patches/run95-stream-final-rows.patch; main
# does not hold it until measured). Call D's ncu: the epilogue, 3500 instructions with write_output's partial and atomic paths compiled
# in, took 40% of the warps' stall samples, mostly "no instruction": the warps drift apart and
# miss the instruction cache; 6488 -> 4160 SASS instructions). Against cli-base.xz (build-r95 cli.xz, HEAD).
# Carry ["build-r95e"] (40 MB): cli.xz, gt.xz (f5394de + the patch + the invariance test's new
# message; every format, D 64;128), cli-base.xz (HEAD's CLI), splitkv312.so.xz (the Python module,
# CPython 3.12, with the patch; bf16 D 64;128; native, fp8, int8, int4_kc).
# Prediction: B=256 window 128 + sinks 44.5 -> 33-38 us on an H100; B=128 24.4 -> 19-21 us.
# Then: the failing MixedRouteInvariance test with its new message, the stream tests, ncu again.
# Carry ["build-r95e", "build-r96"].
# Files under $OUT: e.tsv, stream2.txt, stream2-source.csv, inv.log, pytest.log.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r95e/cli-base.xz > /tmp/cli; xz -dc build-r95e/cli.xz > /tmp/clie; chmod +x /tmp/cli /tmp/clie
xz -dc build-r95e/gt.xz > /tmp/gte; chmod +x /tmp/gte
# The invariance test split by mate (build-r96/gt.xz: HEAD caad229's GPU tests), three rounds.
xz -dc build-r96/gt.xz > /tmp/gt96; chmod +x /tmp/gt96
timeout 90 /tmp/gt96 --gtest_filter='*MixedRouteInvariance*' --gtest_repeat=3 > $OUT/inv.log 2>&1; echo "inv rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[       OK|Failure|moved|mixed route|splits" $OUT/inv.log | sort | uniq -c | head -30 | cut -c1-400
for r in 1 2; do
  for b in 128 256; do
    for s in "--sinks" ""; do
      for c in cli clie; do
        us=$(bash lab/calls/bench_us.sh /tmp/$c --hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 $s -b $b)
        printf '%s\t%s\t%s\t%s\t%s\n' $r $b "${s:-nosinks}" $c $us >> $OUT/e.tsv
      done
    done
  done
done
awk '{k=$2" "$3" "$4; if(!(k in m)||$5<m[k])m[k]=$5} END{for(k in m)print k, m[k]}' $OUT/e.tsv | sort -k1,1n -k2,2 -k3,3
echo "bench $SECONDS s"
timeout 120 /tmp/gte --gtest_filter='DecodeVariantsGpu.TheStreamKernel*:DecodeVariantsGpu.TheVariantsTwins*:*Stream*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head
echo "tests $SECONDS s"
# The Python package's GPU tests on the new defaults (the route under flash_attn_varlen_func over
# a paged cache): the module built on the host for CPython 3.12 (sm_90a bf16 D 64;128; native,
# fp8, int8, int4_kc), the rest of the call.
mkdir -p /tmp/pyb/python/splitkv
xz -dc build-r95e/splitkv312.so.xz > /tmp/pyb/python/splitkv/_splitkv.cpython-312-x86_64-linux-gnu.so
export PYTHONPATH=/tmp/pyb/python:python SPLITKV_CLI=/tmp/clie
T=$(( ${DEADLINE:-550} - 60 - SECONDS )); [ $T -lt 20 ] && T=20
timeout $T python3 -m pytest -q -p no:cacheprovider -p no:randomly -rfEs tests/python/test_torch_gpu.py \
  tests/python/test_torch_mixed_step.py tests/python/test_torch_variants.py tests/python/test_torch_gpu_quant.py \
  > $OUT/pytest.log 2>&1
echo "pytest rc=$? $SECONDS s"; tail -15 $OUT/pytest.log | cut -c1-200
if [ $(( ${DEADLINE:-550} - SECONDS )) -gt 45 ]; then
A="--hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 --sinks -b 256"
timeout 40 ncu --set full --import-source yes -k regex:stream -s 10 -c 1 -o /tmp/stream2 /tmp/clie bench $A --iters 20 > /tmp/ncu.log 2>&1
echo "ncu rc=$? $SECONDS s"
timeout 15 ncu -i /tmp/stream2.ncu-rep --print-details all > $OUT/stream2.txt 2>&1
timeout 15 ncu -i /tmp/stream2.ncu-rep --page source --csv --print-source sass > $OUT/stream2-source.csv 2>&1
grep -E "^ +Duration|Registers Per|Achieved Occupancy|DRAM Throughput|One or More Eligible|Warp Cycles Per Issued|Stall (Wait|No Inst|Long|Selected)" $OUT/stream2.txt | head -14
fi
echo "done $SECONDS s"
