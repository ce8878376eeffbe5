#!/usr/bin/env bash
# Run 54, call 4: how short q_len 1 rows merge their splits now that decode_mma_n8 serves them
# (the auto-cluster thresholds were measured on decode_mma in run 44): planned, combine kernel,
# cluster with 8 / 16 splits, fused combine; three interleaved rounds, best and median.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-carry/n8/splitkv
res=$OUT/merge-sweep.tsv
for round in 1 2 3; do
  for shape in "-b 1 --lk 1024" "-b 1 --lk 2048" "-b 1 --lk 4096" "-b 1 --lk 8192" "-b 1 --lk 16384" "-b 2 --lk 4096"; do
    for cfg in "" "--no-auto-cluster" "--cluster --splits 8" "--cluster --splits 16" "--fused-combine"; do
      rm -f /tmp/r.json
      timeout 30 $B bench $shape $cfg --json /tmp/r.json >/dev/null 2>&1
      us=$(python3 -c 'import json; r=json.load(open("/tmp/r.json"))["rows"][0]; print(r["us"])' 2>/dev/null || echo nan)
      printf '%s\t%s\t%s\t%s\n' "$round" "$shape" "${cfg:-planned}" "$us" >>"$res"
    done
  done
done
python3 - "$res" <<'PY'
import sys, statistics, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, shape, cfg, us = line.rstrip("\n").split("\t")
    if us != "nan": t[(shape, cfg)].append(float(us))
print("| shape | merge | best µs | median µs |\n|---|---|---|---|")
for (shape, cfg), v in t.items():
    print(f"| {shape} | {cfg} | {min(v):.2f} | {statistics.median(v):.2f} |")
PY
for shape in "-b 1 --lk 1024" "-b 1 --lk 8192" "-b 1 --lk 16384"; do $B plan $shape | grep -E "splits:|combine:" | sed "s/^/$shape: /"; done
