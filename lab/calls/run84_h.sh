#!/usr/bin/env bash
# Run 84, call H (the session's last device seconds): the variants suite, our rows only, with HEAD's
# CLI (build-np6/splitkv_v.xz: sm_90a, bf16, D=64 and 128, native and FP8) against
# variants-latest (an H100 file, 1c46349): issue 51's and 53's guard on rows without a change of
# plan, and the rows the tail rule and the twin changed. Then call G's batch scan while time is left.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-np6/splitkv_v.xz > /tmp/v && chmod +x /tmp/v
SPLITKV_COMMIT=$(git rev-parse --short HEAD) timeout 120 /tmp/v bench --suite variants --json $OUT/variants-ours.json >/tmp/v.log 2>&1
echo "variants rc=$? $SECONDS s"
python3 - <<'P'
import json, math, os
def key(c): return json.dumps({k: v for k, v in c.items() if k not in ("family", "strategy", "splits")}, sort_keys=True)
def load(f): return {key(r["case"]): r for r in json.load(open(f))["rows"]}
latest = load("bench/results/variants-latest.json"); now = load(os.environ["OUT"] + "/variants-ours.json")
g = []
for k, r in latest.items():
    if k not in now or not now[k].get("us"): print("missing", k[:120]); continue
    q = r["us"] / now[k]["us"]; g.append(math.log(q)); c = json.loads(k)
    if q < 0.98 or q > 1.05:
        print(f"{q:.3f} latest {r['us']:.2f} now {now[k]['us']:.2f} B={c['B']} {c['Hq']}/{c['Hkv']} D={c['D']} q={c['Lq']} Lk={c['Lk']} {c['kv_format']} "
              f"w={c.get('window_left')} cap={c.get('softcap')} sinks={c.get('sinks')} tree={c.get('tree_mask')}")
print(f"variants rows {len(g)} geo latest/now {math.exp(sum(g)/len(g)):.3f} min {math.exp(min(g)):.3f}")
P
t() { timeout 20 /tmp/v bench $1 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
G="--lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192"
for b in 16 32 48 64 96; do [ $SECONDS -gt 150 ] && break; echo "B=$b $(t "-b $b $G --window 128,-1 --sinks")"; done
[ $SECONDS -lt 160 ] && echo "B=64 head-major $(t "-b 64 $G --window 128,-1 --sinks --kv-head-major")"
[ $SECONDS -lt 165 ] && echo "B=64 lk 1024 $(t "-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 1024 --window 128,-1 --sinks")"
echo "done $SECONDS s"
