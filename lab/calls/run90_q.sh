#!/usr/bin/env bash
# Run 90, issues 51 and 55's speed target against a rebuilt baseline (the issue allows it where the
# card drifts): the quant suite with 31f9961 (quant-latest's commit; build-q31/splitkv.xz: sm_90a
# bf16 D=128, native + fp8 + int8 + int4 + k8v4) and HEAD (build-h/splitkv.xz: the CI build's CLI),
# interleaved old / new / old / new on one card. Prediction: every row of HEAD >= 0.98x of
# 31f9961 by the best of two rounds, FP8 B=1 1k included (0.972-0.979 against the file in four
# runs); INT4 B=1 64k token-major level once both binaries run on the same card.
# Files under $OUT: q-old1.json q-new1.json q-old2.json q-new2.json.
set -uo pipefail
D=${DEADLINE:-520}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-q31/splitkv.xz > /tmp/q-old && xz -dc build-h/splitkv.xz > /tmp/q-new && chmod +x /tmp/q-old /tmp/q-new
for r in 1 2; do
  for b in old new; do
    [ $(left) -gt 100 ] || break 2
    c=$([ $b = old ] && echo 31f9961 || git rev-parse --short HEAD)
    SPLITKV_COMMIT=$c timeout 150 /tmp/q-$b bench --suite quant --json $OUT/q-$b$r.json >/tmp/q-$b$r.log 2>&1
    echo "$b $r rc=$? $SECONDS s"
  done
done
python3 - $OUT <<'P'
import json, math, sys, glob
out = sys.argv[1]
def best(prefix):
    rows = {}
    for f in sorted(glob.glob(f"{out}/q-{prefix}*.json")):
        for r in json.load(open(f))["rows"]:
            k = json.dumps(r["case"], sort_keys=True)
            if r.get("us"): rows[k] = min(rows.get(k, 1e30), r["us"])
    return rows
old, new = best("old"), best("new")
g = []
for k in old:
    if k not in new: print("missing", k); continue
    r = old[k] / new[k]; g.append(math.log(r))
    if r < 0.99: print(f"{r:.3f} old {old[k]:.2f} new {new[k]:.2f} {json.loads(k)}")
if g: print(f"rows {len(g)} geo old/new {math.exp(sum(g)/len(g)):.3f} min {math.exp(min(g)):.3f}")
P
for f in $OUT/q-new*.json; do python3 - "$f" <<'P'
import json, math, sys
def load(f): return {json.dumps(r["case"], sort_keys=True): r["us"] for r in json.load(open(f))["rows"]}
latest = load("bench/results/quant-latest.json"); now = load(sys.argv[1]); g = []
for k, us in latest.items():
    if now.get(k): g.append(math.log(us / now[k]))
print(f"{sys.argv[1]} vs quant-latest: rows {len(g)} geo {math.exp(sum(g)/len(g)):.3f} min {math.exp(min(g)):.3f}")
P
done
echo "done $SECONDS s"
