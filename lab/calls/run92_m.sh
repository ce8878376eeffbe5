#!/usr/bin/env bash
# Run 92 (issue 54): the mixed suite with the serial route beside the side-by-side one.
# build-r92/mixed.xz: HEAD + PlanTuning::mixed_route_serial (sm_90a bf16 D=128 native;fp8;int8 CLI).
# Prediction: serial within 1% of the separate calls back to back on (b), (c) and both FP8 steps
# (the split and merge kernels ~2-5 us), side by side 0.90-0.98x as run 90; on bf16 (a) serial
# keeps part of the route's 1.16x only if the gain came from the parts' plans, not from overlap.
# Files under $OUT: mixed.json, mixed.log.
set -uo pipefail
# The route's GPU tests first (build-r92/gtm.xz: the same sources' GPU tests, bf16 D=128 native;fp8),
# the two serial mixes among them.
bash lab/calls/gpu_test_shards.sh build-r92/gtm.xz 'Mixes/MixedRouteVsReference.*:MixedRouteHostile.*' 150
xz -dc build-r92/mixed.xz > /tmp/f-mixed && chmod +x /tmp/f-mixed
SPLITKV_COMMIT=${COMMIT:-serial} timeout ${MIXED_S:-240} /tmp/f-mixed bench --suite mixed --json $OUT/mixed.json > $OUT/mixed.log 2>&1
echo "mixed rc=$? $SECONDS s"
grep -E "route|separate|^mix| mixed " $OUT/mixed.log | cut -c1-120
