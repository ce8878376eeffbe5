#!/usr/bin/env bash
# Planned in run 91 (issue 53: gpt-oss B=256 window rows under 85% of the read ceiling; bf16 q_len
# 4 window 128 + sinks at 43%, 63.15 us on an H100). lab/patches/run91-bound-short-twin.patch: the
# 32-row tile's two-warp twin at D=64 in a version without the cluster merge's inbox (36864 B: six
# blocks fit shared memory) compiled register-bound for six, taken by one-split plans where six
# blocks save a round (B=256: 2048 blocks in 3 rounds of 792, not 4 of 660).
# Carry ["build-wide2", "build-bt"]: build-wide2/splitkv.xz = base (403f7d9; decode_mma's code is
# HEAD's), build-bt/{new,gt}.xz = HEAD + the patch (sm_90a bf16 D=64/128 native + fp8).
#  1. GPU tests of the patch: DecodeVariantsGpu.* (its twin case B=256 now launches the bound twin),
#     the variants cases, then memcheck over the twin test.
#  2. Five interleaved rounds, best us: gpt-oss 64/8 D=64 q_len 4 window 128 + sinks B=256, B=128,
#     B=64 (plans unchanged there), q_len 4 window 128 B=256 without sinks, plain B=64 8k.
# Prediction: B=256 63.2 -> 52-56 us (a round fewer, each block slower by its spills); the others
# level. Files under $OUT: bt.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-bt/gt.xz 'DecodeVariantsGpu.*:Cases/DecodeVariantsVsReference.*:SinksGpu.*' 120
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt --gtest_filter='DecodeVariantsGpu.TheVariantsTwinsMatchTheReference' > /tmp/mc.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" /tmp/mc.log | tail -3
xz -dc build-wide2/splitkv.xz > /tmp/f-base; xz -dc build-bt/new.xz > /tmp/f-new; chmod +x /tmp/f-*
G="--hq 64 --hkv 8 -d 64 --lk 8192"
rows=("-b 256 --lq 4 --causal --window 128 --sinks" "-b 128 --lq 4 --causal --window 128 --sinks"
      "-b 64 --lq 4 --causal --window 128 --sinks" "-b 256 --lq 4 --causal --window 128" "-b 64 --lq 4 --causal")
for r in 1 2 3 4 5; do
  for c in base new; do
    for i in "${!rows[@]}"; do
      rm -f /tmp/row.json
      timeout 20 /tmp/f-$c bench $G ${rows[$i]} --json /tmp/row.json >/dev/null 2>&1
      us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
      printf '%s\t%s\trow%s\t%s\n' "$r" "$c" "$i" "$us" >> $OUT/bt.tsv
    done
  done
done
python3 - $OUT/bt.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, f, us = line.split()
    if us != "nan": t[(f, c)].append(float(us))
for f in sorted({f for f, _ in t}):
    b, n = t.get((f, "base")), t.get((f, "new"))
    if b and n: print(f, f"base {min(b):.2f} new {min(n):.2f} x{min(b) / min(n):.3f}")
P
/tmp/f-new plan $G ${rows[0]} | grep -E "tile:|splits:"
echo "done $SECONDS s"
