#!/usr/bin/env bash
# Run 93 (issues 51, 55): the planner's L2 prefetch for 8-bit caches merged by the combine kernel:
# the first 128 keys of splits up to 512 keys (pf8 = HEAD + that rule + the skip patch, CLI sm_90a
# bf16 D=128 native;fp8;int8) against q31 (31f9961) and smem (HEAD's rule) on FP8 / INT8 rows.
# Four interleaved rounds, best us. Carry ["build-r92"]. Files under $OUT: pf8.tsv.
# Prediction: B=1 4k FP8 8.37 -> ~7.80 us (1.04x q31), INT8 8.31 -> ~8.17; 8k 1.03-1.04x; rows
# whose plan is unchanged (1k, 2k, 16k, B=8 8k, B=32 4k) level with smem.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
for c in q31-splitkv smem pf8; do xz -dc build-r92/$c.xz > /tmp/f-${c%-splitkv}; done; chmod +x /tmp/f-*
for r in 1 2 3 4; do
  for f in fp8 int8; do
    for row in 1024:1 2048:1 4096:1 8192:1 16384:1 4096:2 8192:8 4096:32; do
      lk=${row%:*}; b=${row#*:}
      for c in q31 smem pf8; do
        rm -f /tmp/r.json
        timeout 20 /tmp/f-$c bench --kv-format $f --lk $lk -b $b --json /tmp/r.json >/dev/null 2>&1
        us=$(python3 -c 'import json; print(json.load(open("/tmp/r.json"))["rows"][0]["us"])' 2>/dev/null || echo nan)
        printf '%s\t%s\t%s\t%s\t%s\n' $r $f $row $c $us >> $OUT/pf8.tsv
      done
    done
  done
done
python3 - $OUT/pf8.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r, f, row, c, us = l.rstrip("\n").split("\t")
    if us != "nan": t[(f, row, c)].append(float(us))
for (f, row, c) in sorted({k[:2] + ("q31",) for k in t}):
    q = min(t[(f, row, "q31")])
    print(f"{f:5s} {row:8s} q31 {q:8.3f}  smem {min(t[(f,row,'smem')]):8.3f} ({q/min(t[(f,row,'smem')]):.3f})  pf8 {min(t[(f,row,'pf8')]):8.3f} ({q/min(t[(f,row,'pf8')]):.3f})")
P
echo "done $SECONDS s"
