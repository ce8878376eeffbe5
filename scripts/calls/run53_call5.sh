#!/usr/bin/env bash
# Run 53, call 5: the slot-fill split rule (bench/NOTES.md, run 53, call 5): each changed row at its
# old and new planned split count, main's default build, three interleaved rounds.
set -uo pipefail
BIN=build-carry/full/splitkv
for round in 1 2 3; do
  for r in "-b 8 --hq 28 --hkv 4 --lk 32768|7 8" "-b 2 --hq 32 --hkv 8 --lk 32768|14 16" \
    "-b 4 --hq 32 --hkv 8 --lk 32768|7 8" "-b 1 --hq 32 --hkv 8 --lk 131072|29 32" \
    "-b 4 --hq 4 --hkv 1 --lk 131072|56 61" "-b 8 --hq 8 --hkv 2 --lk 131072|15 16"; do
    shape=${r%%|*}
    for s in ${r#*|}; do
      echo "r$round [$shape --lq 2 --causal] [--splits $s]: $(timeout 30 $BIN bench $shape --lq 2 --causal --splits $s 2>&1 | tail -1)"
    done
  done
done | tee "$OUT/slot-fill.txt"
