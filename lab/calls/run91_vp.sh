#!/usr/bin/env bash
# Run 91 (planned in run 90), issue 53's prefill rows on an H200 (carry ["build-wide2"]): the variants-prefill suite
# (after a warm row) and FlexAttention on its rows in the same call (merged on the host).
# Prediction: window 4096 over 16k causal at 0.90-0.92x our dense causal rate per visible pair
# (run 89: 0.909 in one run) and >= 1.5x Flex (H100: 1.47x); softcap rows 4-6% over plain
# (three designs measured dead, docs/TUNING.md).
# Files under $OUT: vp-ours.json, vp-flex.json.
set -uo pipefail
D=${DEADLINE:-400}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-wide2/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
C=${COMMIT:?set COMMIT to the commit whose sources build-wide2 holds}
timeout 30 /tmp/skv bench --mode prefill -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 --causal --iters 20 >/dev/null 2>&1
SPLITKV_COMMIT=$C timeout 110 /tmp/skv bench --suite variants-prefill --json $OUT/vp-ours.json >/tmp/vp.log 2>&1
echo "ours rc=$? $SECONDS s"; grep -E "window|softcap|causal" /tmp/vp.log | cut -c1-160 | head -12
for try in 1 2 3; do
  T=$(( $(left) - 15 )); [ $T -lt 40 ] && break
  timeout $T python3 bench/peers_flex.py --suite variants-prefill --json $OUT/vp-flex.json --resume \
    --max-seconds $((T - 10)) >>/tmp/flex.log 2>&1 && break
  echo "flex try $try rc=$? $SECONDS s"
done
echo "flex prefill $SECONDS s"; tail -4 /tmp/flex.log | cut -c1-160
echo "done $SECONDS s"
