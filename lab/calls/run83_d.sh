#!/usr/bin/env bash
# Run 83, call D (the session's last seconds): on an H200, the quant suite once with HEAD's CI
# CLI against quant-latest (issue 55's speed guard); on another card, ncu of the gpt-oss window
# decode rows' kernels (second version; the first timed the peers of the causal decode rows).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
case "$GPU" in
  *H200*)
    xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
    SPLITKV_COMMIT=0a31e86 timeout 140 /tmp/skv bench --suite quant --json $OUT/quant-1.json >/tmp/q.log 2>&1
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
  *)  # the gpt-oss window 128 + sinks decode rows' kernels under ncu (main's wide CLI)
    xz -dc build-ab/splitkv_wide.xz > /tmp/w && chmod +x /tmp/w
    M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
    M=$M,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active
    for q in 1 4; do
      a="-b 64 --lq $q --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks"; [ $q -gt 1 ] && a="$a --causal"
      echo "== q_len $q"
      timeout 60 ncu --kernel-name regex:decode -c 3 --metrics $M --csv /tmp/w bench $a --iters 2 2>/dev/null \
        | awk -F'","' 'NR>1{print $5 " | " $(NF-2) " " $NF}' | cut -c1-160 | tail -12
    done
    ;;
esac
echo "done $SECONDS s"
