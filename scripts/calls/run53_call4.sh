#!/usr/bin/env bash
# Run 53, call 4: plan options on the prefill rows that miss >= 1.05x cuDNN (issue 8), two
# interleaved rounds, main's default build.
set -uo pipefail
BIN=build-carry/full/splitkv
P="--mode prefill"
rows=(
  "$P -b 4 --hq 12 --hkv 12 --lq 1024 --lk 1024 -d 64 --dtype fp16|"
  "$P -b 4 --hq 12 --hkv 12 --lq 1024 --lk 1024 -d 64 --dtype fp16|--no-persistent"
  "$P -b 4 --hq 12 --hkv 12 --lq 1024 --lk 1024 -d 64 --dtype fp16|--family prefill_sm90_m192"
  "$P -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024|"
  "$P -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024|--no-persistent"
  "$P -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024 --causal|"
  "$P -b 16 --hq 16 --hkv 16 --lq 1024 --lk 1024 --causal|--no-persistent"
  "$P -b 4 --hq 16 --hkv 16 --lq 4096 --lk 4096 -d 256|"
  "$P -b 4 --hq 16 --hkv 16 --lq 4096 --lk 4096 -d 256|--family prefill_sm90"
  "$P -b 4 --hq 32 --hkv 8 --lq 4096 --lk 4096 --causal|"
  "$P -b 4 --hq 32 --hkv 8 --lq 4096 --lk 4096 --causal|--family prefill_sm90_gqa"
  "$P -b 4 --hq 32 --hkv 8 --lq 4096 --lk 4096 --causal|--no-persistent"
)
for round in 1 2; do
  for r in "${rows[@]}"; do
    shape=${r%%|*}; opt=${r#*|}
    line=$(timeout 60 $BIN bench $shape $opt 2>&1 | tail -1)
    echo "r$round [$shape] [$opt]: $line"
  done
done | tee "$OUT/prefill-options.txt"
# Decode split counts on the speculative rows below 90% of the ceiling (issue 11): the planner
# keeps splits of >= 2048 keys (kMinKeysPerExtraSplit), so 28/4 q_len 2 fills half the block slots.
for round in 1 2; do
  for r in "--hq 28 --hkv 4 --lq 2 --causal --lk 8192|4 6 7 8" "--hq 28 --hkv 4 --lq 2 --causal --lk 32768|7 8 12 16" \
    "--lq 2 --causal --lk 8192|3 4 6 8" "--lq 4 --causal --lk 8192|3 4 6 8"; do
    shape=${r%%|*}
    for s in ${r#*|}; do
      echo "r$round [$shape] [--splits $s]: $(timeout 30 $BIN bench -b 8 $shape --splits $s 2>&1 | tail -1)"
    done
  done
done | tee "$OUT/decode-splits.txt"
