#!/usr/bin/env bash
# Interleaved A/B of two splitkv binaries on the same shapes: how a code change is judged
# (docs/BENCHMARKING.md, "Judging a change"). Suite-to-suite drift on one row can exceed the
# change being measured, so both binaries run each shape back to back, for several rounds, and the
# table compares the best time of each.
#
#   scripts/ab.sh OLD_BIN NEW_BIN [ROUNDS] -- "bench args" ["bench args" ...]
#   e.g. scripts/ab.sh build-main/splitkv build-gpu/splitkv 2 -- "-b 8 --lk 32768 --kv-format int8" \
#        "--mode prefill -b 4 --hq 16 --hkv 16 --lq 4096 --lk 4096"
#
# Every call runs under `timeout` (AB_TIMEOUT seconds, default 60). Prints one line per run, then
# the table: each binary's best and median time and their ratios (old / new above 1 means the new
# binary is faster). Rows that move by more than the change between rounds need five or more
# rounds, judged by the median. AB_OUT, when set,
# is a file that receives the per-run lines as well.
set -uo pipefail

if [[ $# -lt 4 ]]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
OLD=$1
NEW=$2
shift 2
ROUNDS=2
if [[ $1 != "--" ]]; then
  ROUNDS=$1
  shift
fi
if [[ $1 != "--" ]]; then
  echo "ab.sh: expected -- before the bench arguments, got '$1'" >&2
  exit 2
fi
shift
for bin in "$OLD" "$NEW"; do
  [[ -x $bin ]] || { echo "ab.sh: $bin is not an executable" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs="$work/runs.tsv"
for ((round = 1; round <= ROUNDS; ++round)); do
  for shape in "$@"; do
    for side in old new; do
      bin=$OLD
      [[ $side == new ]] && bin=$NEW
      json="$work/row.json"
      rm -f "$json"
      # shellcheck disable=SC2086  # the shape is a list of arguments
      timeout "${AB_TIMEOUT:-60}" "$bin" bench $shape --json "$json" >/dev/null 2>&1
      rc=$?
      us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' "$json" 2>/dev/null || echo nan)
      line=$(printf '%s\t%s\t%s\t%s\trc=%s' "$round" "$side" "$shape" "$us" "$rc")
      echo "$line"
      echo "$line" >>"$runs"
      [[ -n ${AB_OUT:-} ]] && echo "$line" >>"$AB_OUT"
    done
  done
done

python3 - "$runs" <<'EOF'
import math, statistics, sys
times = {}
order = []
for line in open(sys.argv[1]):
    _, side, shape, us, _ = line.rstrip("\n").split("\t")
    us = float(us)
    if shape not in times:
        times[shape] = {"old": [], "new": []}
        order.append(shape)
    if not math.isnan(us):
        times[shape][side].append(us)
# Best time and median: some rows are bimodal from round to round (run 47: 16 x 16 1k prefill took
# 242-272 µs on one binary), and there the median of several rounds judges better than the best.
fmt = lambda x: f"{x:.2f}" if math.isfinite(x) else "failed"
ratio = lambda o, n: f"{o / n:.3f}" if math.isfinite(o) and math.isfinite(n) else "n/a"
print("\n| shape | old µs | new µs | old / new | old median | new median | old / new (median) |")
print("|---|---|---|---|---|---|---|")
for shape in order:
    o, n = times[shape]["old"], times[shape]["new"]
    ob, nb = min(o, default=math.inf), min(n, default=math.inf)
    om = statistics.median(o) if o else math.inf
    nm = statistics.median(n) if n else math.inf
    print(f"| {shape} | {fmt(ob)} | {fmt(nb)} | {ratio(ob, nb)} | {fmt(om)} | {fmt(nm)} | {ratio(om, nm)} |")
EOF
