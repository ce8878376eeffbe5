#!/usr/bin/env bash
# One suite A/B on the device without building there: SUITE=<decode|quant|prefill|variants|...>,
# A and B the carried xz'd CLIs (paths under build-bin/ or build-ab/), run A/B/B/A interleaved, the
# four JSONs (and one log) under $OUT. DEADLINE (s) bounds the whole call; a run that cannot start
# with 60 s left is skipped.
#   e.g. SUITE=quant A=build-ab/splitkv_base_ci.xz B=build-bin/splitkv.xz bash lab/calls/suite_ab.sh
set -uo pipefail
: "${SUITE:?SUITE=<suite>}" "${A:?A=<xz CLI>}" "${B:?B=<xz CLI>}"
D=${DEADLINE:-500}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc "$A" > /tmp/cli_a && xz -dc "$B" > /tmp/cli_b && chmod +x /tmp/cli_a /tmp/cli_b
for r in a:a1 b:b1 b:b2 a:a2; do
  T=$(( $(left) - 5 )); [ $T -lt 60 ] && { echo "no time for $r"; break; }
  SPLITKV_COMMIT=${r%%:*} timeout $T /tmp/cli_${r%%:*} bench --suite "$SUITE" --json $OUT/$SUITE-${r##*:}.json >>/tmp/ab-$SUITE.log 2>&1
  echo "$SUITE $r rc=$? $SECONDS s"
done
grep -v "not compiled" /tmp/ab-$SUITE.log | tail -60 > $OUT/$SUITE-ab.log
echo "done $SECONDS s"
