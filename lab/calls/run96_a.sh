#!/usr/bin/env bash
# Run 96, call A (carry ["build-r96"], 40 MB): cli.xz and gt.xz are HEAD (the 16-row stream kernel,
# the invariance test split by mate) + lab/patches/run95-stream-final-rows.patch; cli-base.xz is
# run 95's HEAD CLI (no patch); splitkv312.so.xz the Python module (CPython 3.12, with the patch).
# 1. The invariance test, one case per mate change and serial, three rounds (the cause of run 95's
#    failure: which mate moves which sequence's bits).
# 2. The stream kernel tests (the 32-row kernel with the patch; the 16-row kernel's first run).
# 3. The patch against run 95's HEAD: 64/8 q_len 4 D=64 8k window 128 +/- sinks, B=256 and 128.
#    Prediction (H100): B=256 + sinks 44.5 -> 33-38 µs, B=128 24.4 -> 19-21 µs.
# 4. Single-query gpt-oss rows (q_len 1, window 128 + sinks): decode_mma_n8's blocks (default)
#    against the 16-row stream kernel (--family decode_mma), B=256/128/64. Prediction (H100):
#    the stream kernel 1.1-1.3x faster at B=256 and 128 (n8 B=256: 33.6-34.1 µs), level at 64.
# 5. The Python GPU tests on the new defaults (the route under the compat front) with the time left.
# Files under $OUT: inv.log, tests.log, e.tsv, q1.tsv, pytest.log.
set -uo pipefail
D=${DEADLINE:-550}
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r96/cli-base.xz > /tmp/cli; xz -dc build-r96/cli.xz > /tmp/clie; xz -dc build-r96/gt.xz > /tmp/gt
chmod +x /tmp/cli /tmp/clie /tmp/gt
timeout 100 /tmp/gt --gtest_filter='*MixedRouteInvariance*' --gtest_repeat=3 > $OUT/inv.log 2>&1; echo "inv rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[       OK|moved|with the new" $OUT/inv.log | sort | uniq -c | head -24 | cut -c1-300
timeout 120 /tmp/gt --gtest_filter='DecodeVariantsGpu.TheStreamKernel*:DecodeVariantsGpu.TheVariantsTwins*' > $OUT/tests.log 2>&1
echo "stream tests rc=$? $SECONDS s"; grep -E "^\[  (PASSED|FAILED)|Failure|skipped|q_len" $OUT/tests.log | head -12 | cut -c1-300
A="--hq 64 --hkv 8 -d 64 --causal --lk 8192 --window 128"
for b in 256 128; do
  for s in "--sinks" ""; do
    for c in cli clie; do
      us=$(bash lab/calls/bench_us.sh /tmp/$c $A --lq 4 $s -b $b)
      printf '%s\t%s\t%s\t%s\n' $b "${s:-nosinks}" $c $us >> $OUT/e.tsv
    done
  done
done
cat $OUT/e.tsv; echo "bench q4 $SECONDS s"
for r in 1 2; do
  for b in 256 128 64; do
    for f in n8 stream16; do
      fam=""; [ $f = stream16 ] && fam="--family decode_mma"
      us=$(bash lab/calls/bench_us.sh /tmp/clie $A --lq 1 --sinks -b $b $fam)
      printf '%s\t%s\t%s\t%s\n' $r $b $f $us >> $OUT/q1.tsv
    done
  done
done
awk '{k=$2" "$3; if(!(k in m)||$4<m[k])m[k]=$4} END{for(k in m)print k, m[k]}' $OUT/q1.tsv | sort -k1,1n -k2
echo "bench q1 $SECONDS s"
mkdir -p /tmp/pyb/python/splitkv
xz -dc build-r96/splitkv312.so.xz > /tmp/pyb/python/splitkv/_splitkv.cpython-312-x86_64-linux-gnu.so
export PYTHONPATH=/tmp/pyb/python:python SPLITKV_CLI=/tmp/clie
T=$(( D - 15 - SECONDS )); [ $T -lt 20 ] && T=20
timeout $T python3 -m pytest -q -p no:cacheprovider -p no:randomly -rfEs tests/python/test_torch_mixed_step.py \
  tests/python/test_torch_gpu.py tests/python/test_torch_variants.py tests/python/test_torch_gpu_quant.py \
  > $OUT/pytest.log 2>&1
echo "pytest rc=$? $SECONDS s"; tail -8 $OUT/pytest.log | cut -c1-200
echo "done $SECONDS s"
