#!/usr/bin/env bash
# Run 95 (planned in run 94), call B, on an H200 if one comes: the variants suite with
# FlexAttention in the same call (merged on the host: bench/merge_results.py --suite variants),
# to refresh bench/results/variants-latest with the stream kernel on by default.
# Carry ["build-r95"] (cli.xz: sm_90a bf16 D=64;128, every format). Set COMMIT. Or, once the
# stream patch (lab/patches/run95-stream-final-rows.patch) has landed: carry ["build-r95e"] with
# CLI=build-r95e/cli.xz and COMMIT set to the landing commit.
# Prediction (H200, from run 94's H100 A/B): gpt-oss q_len 4 window 128 + sinks bf16 B=256 and
# B=128 ~1.25-1.4x faster than variants-latest; every other row level (>= 0.98x).
# Files under $OUT: variants-ours.json, variants-flex.json.
set -uo pipefail
D=${DEADLINE:-540}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc ${CLI:-build-r95/cli.xz} > /tmp/skv && chmod +x /tmp/skv
C=${COMMIT:?set COMMIT to the commit whose sources build-r95 holds}
SPLITKV_COMMIT=$C timeout 150 /tmp/skv bench --suite variants --json $OUT/variants-ours.json >/tmp/v.log 2>&1
echo "variants ours rc=$? $SECONDS s"
for i in 1 2 3 4; do
  T=$(( $(left) - 15 )); [ $T -lt 30 ] && break
  timeout $T python3 bench/peers_flex.py --suite variants --json $OUT/variants-flex.json --resume \
    --max-seconds $((T - 10)) >/tmp/f.log 2>&1
  rc=$?; echo "flex pass $i rc=$rc $SECONDS s"; [ $rc -eq 0 ] && break
done
tail -3 /tmp/f.log | cut -c1-200
echo "done $SECONDS s"
