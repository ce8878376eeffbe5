#!/usr/bin/env bash
# Run 91 (planned in run 90), issue 53 on an H200 (carry ["build-wide2"]: the sources of run 90's
# last commit, sm_90a bf16 D=64/128 native + fp8 CLI and GPU tests: the two-warp twins (32-row,
# FP8 16-row, decode_mma_n8 where it runs the grid in one round) and the no-key exit).
#  1. GPU tests: variants, sinks, mixed route, zero-length decode, promises. Expected: all pass.
#  2. The variants suite, then FlexAttention on its rows in the same call (merged on the host with
#     bench/merge_results.py --suite variants). Prediction (H200; from H100's variants-latest and
#     run 90's A/Bs): gpt-oss q_len 4 window 128 + sinks bf16 and FP8 at B=64 and B=256 >= 1.3x
#     Flex; q_len 1 B=64 bf16 ~1.6x; window 4096 at 128k <= 1.05x our 4k decode; the B=256 gpt-oss
#     window rows still under 85% of the read ceiling (q_len 1 ~70%, q_len 4 ~45%).
# Files under $OUT: variants-ours.json, variants-flex.json.
set -uo pipefail
D=${DEADLINE:-540}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-wide2/gt.xz \
  '*Variants*:*Sinks*:*Mixed*:DecodeGpu.Zero*:QuantDecodeGpu.Zero*:PromisesGpu.*' ${V_TEST_LIMIT:-90}
echo "tests $SECONDS s"
xz -dc build-wide2/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
C=${COMMIT:?set COMMIT to the commit whose sources build-wide2 holds (the device checkout git HEAD can be stale)}
SPLITKV_COMMIT=$C timeout 120 /tmp/skv bench --suite variants --json $OUT/variants-ours.json >/tmp/v.log 2>&1
echo "variants ours rc=$? $SECONDS s"
for i in 1 2 3 4; do
  T=$(( $(left) - 15 )); [ $T -lt 30 ] && break
  timeout $T python3 bench/peers_flex.py --suite variants --json $OUT/variants-flex.json --resume \
    --max-seconds $((T - 10)) >/tmp/f.log 2>&1
  rc=$?; echo "flex pass $i rc=$rc $SECONDS s"; [ $rc -eq 0 ] && break
done
tail -3 /tmp/f.log | cut -c1-200
echo "done $SECONDS s"
