#!/usr/bin/env bash
# Run 89, call W (the session's last device seconds; carry ["build-head/splitkv.xz"]): the
# variants-prefill suite on an H200 (HEAD's CI CLI, after a warm row) and FlexAttention on its rows
# in the same call, as long as time lasts (issue 53's window prefill and softcap targets on their
# card). Files: vp-ours.json, vp-flex.json.
set -uo pipefail
D=${DEADLINE:-240}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-head/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
W="--mode prefill -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 --causal --iters 20"
timeout 30 /tmp/skv bench $W >/dev/null 2>&1
SPLITKV_COMMIT=$(git rev-parse --short HEAD) timeout 90 /tmp/skv bench --suite variants-prefill --json $OUT/vp-ours.json >/tmp/vp.log 2>&1
echo "ours rc=$? $SECONDS s"; cut -c1-150 /tmp/vp.log | tail -12
timeout $(( $(left) - 5 )) python3 bench/peers_flex.py --suite variants-prefill --json $OUT/vp-flex.json \
  --max-seconds $(( $(left) - 15 )) >/tmp/flex.log 2>&1
echo "flex rc=$? $SECONDS s"; tail -12 /tmp/flex.log | cut -c1-160
echo "done $SECONDS s"
