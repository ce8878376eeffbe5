#!/usr/bin/env bash
# Run 90 (carry ["build-wide/splitkv.xz", "build-wide/n8.xz", "build-wide/n8gt.xz", "build-bis",
# "build-q31"]):
#  1. The 8-row two-warp twin (lab/patches/run90-n8-two-warp-twin.patch; n8.xz / n8gt.xz = HEAD +
#     the patch and b4114c0's exit placement, sm_90a bf16 D=64/128 native + fp8): GPU tests (variants, sinks, decode), then A/B
#     against HEAD (splitkv.xz), two rounds. Prediction (H100): gpt-oss q_len 1 window 128 + sinks
#     bf16 B=64 13.1 -> 9.5-11 us (2 rounds of the four-warp block -> 1), B=256 34.1 -> 26-30
#     (6 rounds -> 3); B=16 (one round either way, no twin) and plain rows level.
#  2. Bisect of the quant suite's FP8 B=1 1k row (31f9961 5.43 us -> HEAD 5.61 on one H100): the
#     CLIs of 31f9961 and of eight commits between (build-bis/<commit>.xz, sm_90a bf16 D=128 native +
#     fp8), three interleaved rounds, best us. Prediction: one or two steps carry the 0.18 us.
# Files under $OUT: n8ab.txt, bisect.tsv.
set -uo pipefail
D=${DEADLINE:-300}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-wide/n8gt.xz '*Variants*:*Sinks*:DecodeGpu.*:QuantDecodeGpu.*:*Mixed*:PromisesGpu.*' ${N8_TEST_LIMIT:-80}
echo "tests $SECONDS s"
xz -dc build-wide/splitkv.xz > /tmp/n8-base && xz -dc build-wide/n8.xz > /tmp/n8-new && chmod +x /tmp/n8-base /tmp/n8-new
G="--hq 64 --hkv 8 -d 64 --lk 8192"
AB_TIMEOUT=30 bash scripts/ab.sh /tmp/n8-base /tmp/n8-new 2 -- \
  "-b 64 $G --window 128,-1 --sinks" "-b 256 $G --window 128,-1 --sinks" "-b 128 $G --window 128,-1" \
  "-b 16 $G --window 128,-1 --sinks" "-b 64 $G" "-b 8 --lk 32768" "-b 64 $G --window 128,-1 --sinks --kv-format fp8" \
  > $OUT/n8ab.txt 2>&1
grep -A10 "^| shape" $OUT/n8ab.txt; echo "ab $SECONDS s"
bins="31f9961"; cp build-q31/splitkv.xz build-bis/31f9961.xz
for x in build-bis/*.xz; do c=$(basename $x .xz); xz -dc $x > /tmp/bis-$c && chmod +x /tmp/bis-$c; done
cp /tmp/n8-base /tmp/bis-40a2cb8; cp /tmp/n8-new /tmp/bis-n8
for r in 1 2 3; do
  for x in build-bis/*.xz 40a2cb8 n8; do
    [ $(left) -gt 15 ] || break 2
    c=$(basename $x .xz); rm -f /tmp/row.json
    timeout 20 /tmp/bis-$c bench --kv-format fp8 --lk 1024 --json /tmp/row.json >/dev/null 2>&1
    us=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' /tmp/row.json 2>/dev/null || echo nan)
    printf '%s\t%s\t%s\n' "$r" "$c" "$us" >> $OUT/bisect.tsv
  done
done
python3 - $OUT/bisect.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, us = line.split()
    if us != "nan": t[c].append(float(us))
for c, v in t.items(): print(c, f"best {min(v):.3f}", " ".join(f"{x:.3f}" for x in v))
P
echo "done $SECONDS s"
