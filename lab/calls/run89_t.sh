#!/usr/bin/env bash
# Run 89, GPU tests of the waiting changes (carry ["build-r2/gt.xz", "build-w3/gt.xz",
# "build-mx/gt.xz"]): run 88's two patches (lab/calls/run88_t.sh) and the mixed route's compacted
# slots (build-mx: HEAD's CI configuration, sm_80 + sm_90a, bf16 D=128, every format, with the
# change). Expected: every MixedRoute* and ChunkedPrefill* test passes on build-mx.
set -uo pipefail
if [ -f build-mx/gt.xz ]; then
  echo "== mixed route slots (build-mx/gt.xz)"
  bash lab/calls/gpu_test_shards.sh build-mx/gt.xz '*Mixed*:*Chunked*:PromisesGpu.*' ${MX_LIMIT:-120}
fi
bash lab/calls/run88_t.sh
