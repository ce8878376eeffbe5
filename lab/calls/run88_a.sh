#!/usr/bin/env bash
# Run 88, call A (HEAD 5ae5a6a; run84_f.sh with the commit named): on an H200, the quant suite once with the CI
# CLI (build-bin/splitkv.xz, 5ae5a6a: quant code as HEAD's) against quant-latest (issue 55's speed
# guard, the *_kc rows); then, on any card, the decode suite with the peers (issue 52 item 7:
# cuDNN's dense time beside its explicit mask on the causal rows) while time is left.
set -uo pipefail
D=${DEADLINE:-300}
left() { echo $(( D - SECONDS )); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
case "$GPU" in
  *H200*)
    SPLITKV_COMMIT=5ae5a6a timeout 140 /tmp/skv bench --suite quant --json $OUT/quant-1.json >/tmp/q.log 2>&1
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
esac
if [ $(left) -gt 120 ]; then
  SPLITKV_COMMIT=5ae5a6a timeout 100 /tmp/skv bench --suite decode --json $OUT/decode-ours.json >/tmp/d.log 2>&1
  echo "decode rc=$? $SECONDS s"
  timeout $(( $(left) - 15 )) python3 bench/peers.py --suite decode --json $OUT/decode-peers.json >/tmp/dp.log 2>&1
  echo "peers rc=$? $SECONDS s"; tail -2 /tmp/dp.log | cut -c1-200
  mkdir -p /tmp/m && python3 bench/merge_results.py --suite decode --ours $OUT/decode-ours.json \
    --peers $OUT/decode-peers.json --out /tmp/m >/dev/null 2>&1 && cp /tmp/m/decode-latest.md $OUT/decode-merged.md && grep causal /tmp/m/decode-latest.md | cut -c1-220
fi
echo "done $SECONDS s"
