#!/usr/bin/env bash
# Run 88, the patches' GPU tests (carry ["build-r2/gt.xz", "build-w3/gt.xz"]): the no-fold twin's
# (bf16 D=128 native) and the two-warp short blocks' (bf16 D=64 native + FP8). Expected: all pass
# but, on the two-warp build, DecodeVariantsGpu.TheRegisterBoundTwinMatchesTheReference's
# register_bound_blocks check (that patch leaves the m32 tile no twin to bind).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
if [ -f build-r2/gt.xz ]; then
  echo "== no-fold twin (build-r2/gt.xz)"
  bash lab/calls/gpu_test_shards.sh build-r2/gt.xz '*Variants*:*Sinks*:PromisesGpu.*:AdversarialGpu.*:DecodeGpu.*' ${R2_LIMIT:-100}
fi
if [ -f build-w3/gt.xz ]; then
  echo "== two-warp short blocks (build-w3/gt.xz)"
  bash lab/calls/gpu_test_shards.sh build-w3/gt.xz '*Decode*:*Variants*:*Sinks*:*Quant*:*Spec*:PromisesGpu.*:AdversarialGpu.*' ${W3_LIMIT:-100}
fi
echo "done $SECONDS s"
