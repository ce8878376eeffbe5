#!/usr/bin/env bash
# Run 94 (issue 54), call B: the mixed suite's steps a, b, e for the builds before the two changes
# of call A, one at a time: skip (48882d2 + the empty-sequence skip, = HEAD's prefill part), scan
# (the scan alone). Carry ["build-r93"]. Files under $OUT: mixed-{skip,scan}.{json,log}.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for c in skip scan; do
  xz -dc build-r93/$c.xz > /tmp/cli-$c; chmod +x /tmp/cli-$c
  SPLITKV_MIXED_ONLY=abe SPLITKV_COMMIT=$c timeout 200 /tmp/cli-$c bench --suite mixed --json $OUT/mixed-$c.json > $OUT/mixed-$c.log 2>&1
  echo "$c rc=$? $SECONDS s"
  grep -E "route|separate" $OUT/mixed-$c.log | cut -c1-130
done
