#!/usr/bin/env bash
# Run 81, call C: no build. (1) The prefill row that hung in call B (B=1, 16/16 heads, 16384 x
# 16384, D=128 bf16, not causal) three times with HEAD (build-bin) and with ebce4af (build-ab base),
# 60 s each at most. (2) Issue 51's guard: the decode suite A/B/B/A against e11f125 (decode-latest's
# commit) and the quant suite against 31f9961 (quant-latest's), both sm_90a bf16 D=128 builds
# against HEAD's CI-config CLI. Results tarred into one file.
set -uo pipefail
D=${DEADLINE:-500}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-bin/splitkv.xz > /tmp/head && xz -dc build-ab/splitkv_base.xz > /tmp/ebce && chmod +x /tmp/head /tmp/ebce
for i in 1 2 3; do for c in head ebce; do
  timeout 60 /tmp/$c bench --mode prefill -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 -d 128 --dtype bf16 --iters 50 >/tmp/row7.$c.$i 2>&1
  echo "row7 $c $i rc=$? $SECONDS s: $(tail -1 /tmp/row7.$c.$i | cut -c1-160)"
done; done
mkdir -p /tmp/ab/decode /tmp/ab/quant
T=$(( ($(left) - 10) / 2 ))
OUT=/tmp/ab/decode DEADLINE=$T SUITE=decode A=build-ab/splitkv_e11f125.xz B=build-bin/splitkv.xz bash lab/calls/suite_ab.sh
OUT=/tmp/ab/quant DEADLINE=$(( $(left) - 10 )) SUITE=quant A=build-ab/splitkv_31f9961.xz B=build-bin/splitkv.xz bash lab/calls/suite_ab.sh
cat /tmp/row7.* > /tmp/ab/row7.log
tar -C /tmp/ab -cJf $OUT/ab.tar.xz .
echo "done $SECONDS s"
