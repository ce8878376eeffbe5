#!/usr/bin/env bash
# Run 54, call 6: split merging on the speculative and long rows
# (the auto-cluster rule covers only rows up to 4096 keys): planned, cluster with the planned
# splits, fused combine; three interleaved rounds, best and median.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-carry/n8/splitkv
res=$OUT/merge-sweep-long.tsv
for round in 1 2 3; do
  for shape in "-b 8 --lk 8192 --hq 28 --hkv 4 --lq 2 --causal" "-b 8 --lk 8192 --hq 28 --hkv 4 --lq 4 --causal" \
    "-b 8 --lk 8192 --lq 4 --causal" "-b 8 --lk 8192" "-b 1 --lk 65536" "-b 1 --lk 131072 --page-size 16"; do
    for cfg in "" "--cluster" "--fused-combine" "--no-prefill-route"; do
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
for shape in "-b 8 --lk 8192 --hq 28 --hkv 4 --lq 2 --causal" "-b 8 --lk 8192 --hq 28 --hkv 4 --lq 4 --causal" "-b 1 --lk 65536"; do $B plan $shape | grep -E "splits:|combine:" | sed "s/^/$shape: /"; done
