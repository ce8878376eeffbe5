#!/usr/bin/env bash
# Next session, call B (prepared in run 81): issue 51's remaining guards with lab/calls/suite_ab.sh,
# each suite A/B/B/A against the -latest file's commit: variants (1c46349 vs wide = main) and
# strategies (0102b9b vs wide), both sm_90a D 64/128 fp16/bf16 builds with the study families.
# Results tarred into one file.
set -uo pipefail
D=${DEADLINE:-520}
left() { echo $(( D - SECONDS )); }
mkdir -p /tmp/ab/variants /tmp/ab/strategies
OUT=/tmp/ab/variants DEADLINE=$(( ($(left) - 10) / 2 )) SUITE=variants A=build-ab/splitkv_1c46349.xz B=build-ab/splitkv_wide.xz bash lab/calls/suite_ab.sh
OUT=/tmp/ab/strategies DEADLINE=$(( $(left) - 10 )) SUITE=strategies A=build-ab/splitkv_0102b9b.xz B=build-ab/splitkv_wide.xz bash lab/calls/suite_ab.sh
tar -C /tmp/ab -cJf $OUT/ab.tar.xz .
echo "done $SECONDS s"
