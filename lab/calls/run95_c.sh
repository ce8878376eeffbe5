#!/usr/bin/env bash
# Run 95 (planned in run 94), call C: the stream kernel at twelve one-warp blocks per SM with a
# three-stage ring (lab/patches/run94-stream-12x3.patch: 16384 B per warp, __launch_bounds__
# (32, 12): 168 registers, 14 B spilled) against run 94's ten blocks with four stages.
# Why: at B=256 the 2048 items fall on 1320 warps (1.55 each: the second half runs 728 warps);
# 1584 warps give 1.29 each, at two sub-tiles in flight per warp instead of three.
# Carry ["build-r95"]: cli.xz (HEAD, every format) and cli-s12.xz (the patch; bf16 D=64 native).
# Prediction (H100 or H200, whichever comes; both CLIs in this call): B=256 window 128 + sinks
# within +-10% of v2@10 (45.5 us on the H100); a gain only if the tail, not the ring depth, sets
# the time. B=128 (1024 items: one item per warp either way) level or slower.
# Files under $OUT: s12.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r95/cli.xz > /tmp/cli; xz -dc build-r95/cli-s12.xz > /tmp/cli12; chmod +x /tmp/cli /tmp/cli12
/tmp/cli12 plan --hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 --sinks -b 256 | grep -E "^persistent"
for r in 1 2 3; do
  for b in 128 256; do
    for s in "--sinks" ""; do
      for c in cli cli12; do
        us=$(bash lab/calls/bench_us.sh /tmp/$c --hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 $s -b $b)
        printf '%s\t%s\t%s\t%s\t%s\n' $r $b "${s:-nosinks}" $c $us >> $OUT/s12.tsv
      done
    done
  done
done
sort -k2,2n -k3,3 -k4,4 $OUT/s12.tsv | awk '{k=$2" "$3" "$4; if(!(k in m)||$5<m[k])m[k]=$5} END{for(k in m)print k, m[k]}' | sort
echo "done $SECONDS s"
