#!/usr/bin/env bash
# Run 90, issue 53 on an H200 (carry ["build-wide"]: HEAD's sm_90a bf16 D=64/128 native + fp8 CLI
# and GPU tests, the two-warp twins and the early exit of blocks that read no key included).
#  1. GPU tests: variants, sinks, mixed route, zero-length decode (the twins and the early exit
#     together for the first time). Expected: all pass.
#  2. The variants suite, then FlexAttention on its rows in the same call (merged on the host).
#     Prediction (H200; H100's variants-latest + run 90's twin A/B): gpt-oss q_len 4 window 128 +
#     sinks bf16 B=64 and B=256 and FP8 B=64 and B=256 at >= 1.3x Flex (H100 would give 1.35-1.48x);
#     q_len 1 rows and the tree rows keep 1.3x and up; window 4096 at 128k <= 1.05x our 4k decode.
# Files under $OUT: variants-ours.json, variants-flex.json.
set -uo pipefail
D=${DEADLINE:-540}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-wide/gt.xz \
  '*Variants*:*Sinks*:*Mixed*:DecodeGpu.Zero*:QuantDecodeGpu.Zero*:PromisesGpu.*' ${V_TEST_LIMIT:-90}
echo "tests $SECONDS s"
xz -dc build-wide/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
C=$(git rev-parse --short HEAD)
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
