#!/usr/bin/env bash
# Run 53, call 6: split counts of the q_len 1 rows short of 95% of the ceiling (issue 11), two rounds.
set -uo pipefail
BIN=build-carry/full/splitkv
for round in 1 2; do
  for r in "-b 1 --lk 16384|14 16 22 32" "-b 1 --lk 65536|14 16 22 32" "-b 8 --lk 8192|2 3 4"; do
    shape=${r%%|*}
    for s in ${r#*|}; do
      echo "r$round [$shape] [--splits $s]: $(timeout 30 $BIN bench $shape --splits $s 2>&1 | tail -1)"
    done
  done
done | tee "$OUT/q1-splits.txt"
