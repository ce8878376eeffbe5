#!/usr/bin/env bash
# Run 88, call D (any card; carry ["build-bin/splitkv.xz"]: HEAD's CI-configuration CLI): the mixed
# suite (issue 54) — the plain one call, the mixed route, the separate calls back to back and side
# by side in one run. Question: does the route (off by default) beat the plain call on every step,
# so that it can be the default? Run 80 (H100, different runs): route/separate 1.16, 0.98, 0.96
# (bf16 a-c), 0.96, 0.89, 0.88 (FP8); the plain call 0.40-0.95x separate (bf16), 0.18-0.20x (FP8).
# Prediction: route beats the plain call on all six steps, bf16 (c) by the least (0.95-1.05x).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
SPLITKV_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo 5a4179c) timeout ${MIXED_LIMIT:-300} /tmp/skv bench --suite mixed --json $OUT/mixed.json > $OUT/mixed.txt 2>&1
echo "mixed rc=$? $SECONDS s"; cat $OUT/mixed.txt | cut -c1-140
