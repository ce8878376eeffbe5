#!/usr/bin/env bash
# Run 84, call F (the session's last device seconds): on an H200, the quant suite once with the CI
# CLI (build-bin/splitkv.xz, 0a31e86: quant code as HEAD's) against quant-latest (issue 55's speed
# guard, the *_kc rows); then, on any card, the decode suite with the peers (issue 52 item 7:
# cuDNN's dense time beside its explicit mask on the causal rows) while time is left.
set -uo pipefail
D=${DEADLINE:-300}
COMMIT=${COMMIT:-0a31e86}  # the carried CLI's commit (run88_a.sh: 5ae5a6a)
left() { echo $(( D - SECONDS )); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
case "$GPU" in
  *H200*)
    bash lab/calls/quant_guard.sh /tmp/skv $COMMIT $OUT/quant-1.json
    ;;
esac
if [ $(left) -gt 120 ]; then
  SPLITKV_COMMIT=$COMMIT timeout 100 /tmp/skv bench --suite decode --json $OUT/decode-ours.json >/tmp/d.log 2>&1
  echo "decode rc=$? $SECONDS s"
  timeout $(( $(left) - 15 )) python3 bench/peers.py --suite decode --json $OUT/decode-peers.json >/tmp/dp.log 2>&1
  echo "peers rc=$? $SECONDS s"; tail -2 /tmp/dp.log | cut -c1-200
  mkdir -p /tmp/m && python3 bench/merge_results.py --suite decode --ours $OUT/decode-ours.json \
    --peers $OUT/decode-peers.json --out /tmp/m >/dev/null 2>&1 && cp /tmp/m/decode-latest.md $OUT/decode-merged.md && grep causal /tmp/m/decode-latest.md | cut -c1-220
fi
echo "done $SECONDS s"
