#!/usr/bin/env bash
# Run 94 (issue 53), the stream kernel (lab/patches/run93-decode-stream.patch, PlanTuning::
# decode_stream, CLI --decode-stream): the gpt-oss q_len 4 window 128 rows' one-split plans on a
# persistent grid of one-warp blocks (10 per SM), each warp serving whole (sequence, KV head)
# items one after another, final rows from registers (no merge, no block barrier).
# Why: at B=256 the bound two-warp twin runs 2048 blocks in 3 rounds at 47% of the read ceiling;
# rounds of short blocks start and end together (all loading, then all merging and writing), and
# an earlier ncu put ~half of a short block's time in its prologue, merge and write.
# v2 (lab/patches/run93-decode-stream-v2.patch) also issues the next item's Q tile and first
# sub-tiles before the current item's rows are written (198 registers: still ten blocks per SM).
# Carry ["build-r94"]: gts.xz / cli.xz (v1), gts2.xz / cli2.xz (v2): GPU tests and CLI, sm_90a
# bf16 D=64;128 native;fp8, HEAD a834b88 + the patch.
# Prediction (H100): B=256 window 128 + sinks 57.6 -> 35-45 us; B=128 34.6 -> 22-28; B=64 level or
# slower (one round already); the twins' and variants' tests unchanged.
# Files under $OUT: stream.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for g in gts gts2; do
  bash lab/calls/gpu_test_shards.sh build-r94/$g.xz 'DecodeVariantsGpu.*:Cases/DecodeVariantsVsReference.*:SinksGpu.*:DecodeGpu.Zero*' 120
  timeout 90 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt --gtest_filter='DecodeVariantsGpu.TheStreamKernel*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | head -3
done
xz -dc build-r94/cli.xz > /tmp/cli; xz -dc build-r94/cli2.xz > /tmp/cli2; chmod +x /tmp/cli /tmp/cli2
/tmp/cli plan --hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 --sinks -b 256 --decode-stream | grep -E "^(splits|tile|grid|persistent)"
for r in 1 2 3; do
  for b in 64 128 256; do
    for s in "--sinks" ""; do
      for a in "cli|" "cli|--decode-stream" "cli2|--decode-stream"; do
        c=${a%%|*}; f=${a#*|}
        us=$(bash lab/calls/bench_us.sh /tmp/$c --hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 $s -b $b $f)
        name=twin; [ -n "$f" ] && name=stream-${c#cli}; [ "$name" = stream- ] && name=stream-v1
        printf '%s\t%s\t%s\t%s\t%s\n' $r $b "${s:-nosinks}" "$name" $us >> $OUT/stream.tsv
      done
    done
  done
done
python3 - $OUT/stream.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r, b, s, a, us = l.rstrip("\n").split("\t")
    if us != "nan": t[(int(b), s, a)].append(float(us))
for (b, s, a) in sorted(k for k in t if k[2] == "twin"):
    tw = min(t[(b, s, "twin")])
    v1, v2 = (min(t.get((b, s, v), [float("nan")])) for v in ("stream-v1", "stream-2"))
    print(f"B={b:4d} {s:8s} twin {tw:8.2f}  stream v1 {v1:8.2f} (x {tw / v1:.3f})  v2 {v2:8.2f} (x {tw / v2:.3f})")
P
echo "done $SECONDS s"
