#!/usr/bin/env bash
# Issue 55's speed guard: the quant suite once with a carried CLI, against
# bench/results/quant-latest.json; prints each row below 0.98x, then the geometric mean and the
# minimum of latest / now over the rows both hold.
#   lab/calls/quant_guard.sh CLI COMMIT OUT_JSON
set -uo pipefail
SPLITKV_COMMIT=$2 timeout 140 "$1" bench --suite quant --json "$3" >/tmp/q.log 2>&1
echo "quant rc=$? (${SECONDS} s)"
python3 - "$3" <<'P'
import json, math, sys
def load(f):
    return {json.dumps(r["case"], sort_keys=True): r["us"] for r in json.load(open(f))["rows"]}
latest = load("bench/results/quant-latest.json"); now = load(sys.argv[1])
g = []
for k, us in latest.items():
    if k not in now or not now[k]: print("missing", k); continue
    r = us / now[k]; g.append(math.log(r))
    if r < 0.98: print(f"{r:.3f} latest {us:.1f} now {now[k]:.1f} {json.loads(k)}")
print(f"quant rows {len(g)} geo latest/now {math.exp(sum(g)/len(g)):.3f} min {math.exp(min(g)):.3f}")
P
