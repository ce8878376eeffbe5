#!/usr/bin/env bash
# Run 93 (issues 51, 55): FP8 B=1 4k. run93_b found HEAD's 4k row at 1.005x of 31f9961 without the
# L2 prefetch (8.095 us; 8.364 with the rule's whole-split prefetch of 256 keys) and 1.014x with 12
# splits; INT8 4k gains from the same prefetch (8.287 vs 8.738). A sweep to set the rule:
# FP8 / INT8, B=1 2k/4k/8k and B=4 4k, prefetch keys 0/32/128/rule, splits 12 with and without it;
# q31 (31f9961) default alongside. Three interleaved rounds, best us.
# Carry ["build-r92"]. Files under $OUT: sweep.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r92/q31-splitkv.xz > /tmp/f-q31; xz -dc build-r92/smem.xz > /tmp/f-smem; chmod +x /tmp/f-*
cfgs=("q31|" "smem|" "smem|--l2-prefetch-keys 0" "smem|--l2-prefetch-keys 32" "smem|--l2-prefetch-keys 128"
      "smem|--splits 12" "smem|--splits 12 --l2-prefetch-keys 0")
for r in 1 2 3; do
  for f in fp8 int8; do
    for row in 2048:1 4096:1 8192:1 4096:4; do
      lk=${row%:*}; b=${row#*:}
      for cfg in "${cfgs[@]}"; do
        c=${cfg%%|*}; a=${cfg#*|}
        rm -f /tmp/r.json
        timeout 20 /tmp/f-$c bench --kv-format $f --lk $lk -b $b $a --json /tmp/r.json >/dev/null 2>&1
        us=$(python3 -c 'import json; print(json.load(open("/tmp/r.json"))["rows"][0]["us"])' 2>/dev/null || echo nan)
        printf '%s\t%s\t%s\t%s\t%s\n' $r $f $row "$c ${a:-default}" $us >> $OUT/sweep.tsv
      done
    done
  done
done
python3 - $OUT/sweep.tsv <<'P'
import sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r, f, row, a, us = l.rstrip("\n").split("\t")
    if us != "nan": t[(f, row, a)].append(float(us))
for f in ("fp8", "int8"):
    for row in ("2048:1", "4096:1", "8192:1", "4096:4"):
        base = min(t.get((f, row, "q31 default"), [float("nan")]))
        print(f, row, "  ".join(f"{a.replace('smem ', '').replace('--l2-prefetch-keys', 'pf').replace('--splits', 's')}={min(v):.3f}({base/min(v):.3f})" for (ff, rr, a), v in t.items() if ff == f and rr == row))
P
for f in fp8 int8; do for lk in 2048 4096 8192; do echo "$f $lk: $(/tmp/f-smem plan --kv-format $f --lk $lk | grep -E '^(splits|combine|family)' | tr '\n' ' ' | cut -c1-230)"; done; done
echo "done $SECONDS s"
