#!/usr/bin/env bash
# Run 83, call B (H200 wanted): HEAD's CI-config CLI (build-bin/splitkv.xz) on the quant suite
# (issue 55's speed guard against quant-latest, its *_kc rows included) twice, then the decode
# suite with the peers (issue 52 item 7: cuDNN's dense time beside its explicit-mask time).
# On another card only the decode suite.
set -uo pipefail
D=${DEADLINE:-500}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
C=${CLI_COMMIT:-$(git rev-parse --short HEAD)}  # the commit the carried CLI was built from
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in *H200*) Q="1 2" ;; *) Q="" ;; esac  # quant-latest is an H200 file: compare only there
for i in $Q; do
  SPLITKV_COMMIT=$C timeout 150 /tmp/skv bench --suite quant --json $OUT/quant-$i.json >/tmp/q$i.log 2>&1
  echo "quant $i rc=$? $SECONDS s"
done
[ -n "$Q" ] && python3 - <<'P'
import json, math, os
out = os.environ["OUT"]
def load(f):
    try: d = json.load(open(f))
    except Exception as e: print(f, e); return {}
    return {json.dumps(r["case"], sort_keys=True): r["us"] for r in d["rows"]}
latest = load("bench/results/quant-latest.json"); a = load(f"{out}/quant-1.json"); b = load(f"{out}/quant-2.json")
g = []
for k, us in latest.items():
    n = [x[k] for x in (a, b) if k in x and x[k]]
    if not n: print("missing", k); continue
    r = us / min(n); g.append(math.log(r)); c = json.loads(k)
    if r < 0.99: print(f"{r:.3f} latest {us:.1f} now {min(n):.1f} {c}")
print(f"quant rows {len(g)} geo latest/now {math.exp(sum(g)/len(g)):.3f} min {math.exp(min(g)):.3f}")
P
if [ $(left) -gt 150 ]; then
  SPLITKV_COMMIT=$C timeout 120 /tmp/skv bench --suite decode --json $OUT/decode-ours.json >/tmp/d.log 2>&1
  echo "decode rc=$? $SECONDS s"
  timeout $(( $(left) - 20 )) python3 bench/peers.py --suite decode --json $OUT/decode-peers.json >/tmp/dp.log 2>&1
  echo "peers rc=$? $SECONDS s"; tail -3 /tmp/dp.log | cut -c1-200
  mkdir -p /tmp/m && python3 bench/merge_results.py --suite decode --ours $OUT/decode-ours.json \
    --peers $OUT/decode-peers.json --out /tmp/m >/dev/null 2>&1 && cp /tmp/m/decode-latest.md $OUT/ && grep causal /tmp/m/decode-latest.md | cut -c1-260
fi
echo "done $SECONDS s"
