#!/usr/bin/env bash
# Run 96, call C (carry ["build-r96b"]): HEAD + the stream patch + the 16-row stream kernel as the
# default for single-query short-window rows. 1. The invariance test with its case fixed (call A:
# every watched sequence kept its bits in all 18 runs; the lengthened decode mate read keys the
# case had poisoned as unused, so its reference check failed): expect 6 of 6 pass, twice.
# 2. The stream and twin tests (the twins now planned without the stream kernel).
# 3. Single-query gpt-oss rows on the new default (expect ~32.8 / 19.0 / 10.5 µs at B=256/128/64,
# as call A's stream16), and --no-decode-stream (n8's blocks, ~34.1 / 20.3 / 10.7).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r96b/cli.xz > /tmp/cli; xz -dc build-r96b/gt.xz > /tmp/gt; chmod +x /tmp/cli /tmp/gt
timeout 60 /tmp/gt --gtest_filter='*MixedRouteInvariance*' --gtest_repeat=2 > $OUT/inv.log 2>&1; echo "inv rc=$?"
grep -E "^\[  (PASSED|FAILED) |moved|with the new" $OUT/inv.log | sort | uniq -c | head -12 | cut -c1-250
timeout 100 /tmp/gt --gtest_filter='DecodeVariantsGpu.TheStreamKernel*:DecodeVariantsGpu.TheVariantsTwins*' > $OUT/tests.log 2>&1
echo "stream tests rc=$? $SECONDS s"; grep -E "^\[  (PASSED|FAILED)|Failure|skipped" $OUT/tests.log | head -8 | cut -c1-250
A="--hq 64 --hkv 8 -d 64 --causal --lk 8192 --window 128 --lq 1 --sinks"
for b in 256 128 64; do
  for s in "" "--no-decode-stream"; do
    us=$(BENCH_TIMEOUT=25 bash lab/calls/bench_us.sh /tmp/cli $A -b $b $s)
    printf '%s\t%s\t%s\n' $b "${s:-default}" $us | tee -a $OUT/q1.tsv
  done
done
echo "done $SECONDS s"
