#!/usr/bin/env bash
# Run 83, call D (the session's last seconds): on an H200, the quant suite once with HEAD's CI
# CLI against quant-latest (issue 55's speed guard); on another card, the peers on the decode
# suite's causal speculative rows only (issue 52 item 7: cuDNN's dense time beside its mask).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
case "$GPU" in
  *H200*)
    xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
    SPLITKV_COMMIT=1415932 timeout 140 /tmp/skv bench --suite quant --json $OUT/quant-1.json >/tmp/q.log 2>&1
    echo "quant rc=$? $SECONDS s"
    python3 - <<'P'
import json, math, os
def load(f):
    return {json.dumps(r["case"], sort_keys=True): r["us"] for r in json.load(open(f))["rows"]}
latest = load("bench/results/quant-latest.json"); now = load(os.environ["OUT"] + "/quant-1.json")
g = []
for k, us in latest.items():
    if k not in now or not now[k]: print("missing", k); continue
    r = us / now[k]; g.append(math.log(r))
    if r < 0.98: print(f"{r:.3f} latest {us:.1f} now {now[k]:.1f} {json.loads(k)}")
print(f"quant rows {len(g)} geo latest/now {math.exp(sum(g)/len(g)):.3f} min {math.exp(min(g)):.3f}")
P
    ;;
  *)
    timeout 150 python3 bench/peers.py --suite decode --filter causal --json $OUT/decode-peers-causal.json 2>&1 | tail -12 | cut -c1-220
    ;;
esac
echo "done $SECONDS s"
