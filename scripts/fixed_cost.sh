#!/usr/bin/env bash
# Splits one shape's time into streaming and fixed cost: times `splitkv bench` over several cache
# lengths and fits  us = bytes / rate + fixed  by least squares. A kernel that streams at the read
# ceiling but sits below it on short rows has its gap in `fixed` (launch, prologue, epilogue, tail,
# combine); one whose rate is below the ceiling has it in the loop. Keep the split count fixed
# (--splits N), or the fit mixes two plans.
#
#   scripts/fixed_cost.sh BIN "bench args without --lk" LK [LK ...]
#   e.g. scripts/fixed_cost.sh build/splitkv "-b 8 --hq 28 --hkv 4 --lq 8 --causal --splits 4" 2048 4096 8192 32768
#
# Every run is under `timeout` (FIXED_COST_TIMEOUT seconds, default 60).
set -uo pipefail

if [[ $# -lt 4 ]]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
BIN=$1
ARGS=$2
shift 2
[[ -x $BIN ]] || { echo "fixed_cost.sh: $BIN is not an executable" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for lk in "$@"; do
  # shellcheck disable=SC2086
  if ! timeout "${FIXED_COST_TIMEOUT:-60}" "$BIN" bench $ARGS --lk "$lk" --json "$work/$lk.json" >"$work/$lk.log" 2>&1; then
    echo "fixed_cost.sh: --lk $lk failed: $(tail -1 "$work/$lk.log")" >&2
    exit 1
  fi
done

python3 - "$work" "$@" <<'EOF'
import json, sys

work, lengths = sys.argv[1], sys.argv[2:]
points = []
for lk in lengths:
    row = json.load(open(f"{work}/{lk}.json"))["rows"][0]
    mb = row["gbps"] * row["us"] * 1e-3  # bytes the call reads, in MB (GB/s x µs = kB)
    points.append((int(lk), mb, row["us"], row["case"].get("splits")))
print("   Lk        MB        µs  splits")
for lk, mb, us, splits in points:
    print(f"{lk:7d} {mb:9.1f} {us:9.2f}  {splits}")
if len({p[3] for p in points}) > 1:
    print("warning: the split count changes with the length; pass --splits N for a clean fit")
n = len(points)
mx = sum(p[1] for p in points) / n
my = sum(p[2] for p in points) / n
sxx = sum((p[1] - mx) ** 2 for p in points)
if sxx == 0:
    sys.exit("fixed_cost.sh: every length reads the same bytes; give lengths that differ")
slope = sum((p[1] - mx) * (p[2] - my) for p in points) / sxx  # µs per MB
fixed = my - slope * mx
worst = max(abs(p[2] - (fixed + slope * p[1])) for p in points)
print(f"fit: stream {1e3 / slope:.0f} GB/s, fixed {fixed:.2f} µs per call "
      f"(largest residual {worst:.2f} µs over {n} lengths)")
EOF
