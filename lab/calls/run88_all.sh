#!/usr/bin/env bash
# Run 88, one call for the session's first machine (carry ["build-bin/splitkv.xz", "build-w3",
# "build-r2"]): the calls A-D's timed parts in priority order, each only while time is left
# (DEADLINE seconds, default 560), so one start does the most:
#  1. H200 only: the quant suite against quant-latest (issue 55's guard; run88_a.sh's first half).
#  2. R2's no-fold instance A/B (run88_b.sh's timing; prediction 7.39 -> 7.1-7.2 us on H100).
#  3. The two-warp short-block A/Bs (run87_f.sh's timing; its predictions).
#  4. The mixed suite (run88_d.sh).
# Files under $OUT (<= 8): quant-1.json, r2.txt, w3.txt, w3-8.txt, mixed.txt, mixed.json.
set -uo pipefail
D=${DEADLINE:-560}
left() { echo $(( D - SECONDS )); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
unpack() { xz -dc "$1" > "$2" && chmod +x "$2"; }
unpack build-bin/splitkv.xz /tmp/skv
for b in main new; do unpack build-r2/$b.xz /tmp/r2-$b; done
for b in main new new8; do unpack build-w3/$b.xz /tmp/w3-$b; done
case "$GPU" in
  *H200*)
    bash lab/calls/quant_guard.sh /tmp/skv 5ae5a6a $OUT/quant-1.json
    ;;
esac
R="--lq 4 --causal --hq 32 --hkv 8 -d 128"
AB_TIMEOUT=30 bash scripts/ab.sh /tmp/r2-main /tmp/r2-new 3 -- \
  "-b 1 $R --lk 8192 --window 128,-1 --sinks" "-b 1 $R --lk 8192 --window 128,-1" \
  "-b 8 $R --lk 32768 --window 4096,-1 --sinks" "-b 64 $R --lk 8192 --window 128,-1 --sinks" \
  "-b 8 $R --lk 8192" > $OUT/r2.txt 2>&1
echo "r2 $SECONDS s"; grep -A8 "^| shape" $OUT/r2.txt
G="--lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192"
S="--window 128,-1 --sinks"
if [ $(left) -gt 100 ]; then
  AB_TIMEOUT=30 bash scripts/ab.sh /tmp/w3-main /tmp/w3-new 2 -- \
    "-b 64 $G $S" "-b 256 $G $S" "-b 16 $G $S" "-b 1 $G $S" "-b 64 $G" \
    "-b 4 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 32768" \
    "-b 64 $G $S --kv-format fp8" "-b 256 $G $S --kv-format fp8" "-b 16 $G $S --kv-format fp8" \
    "-b 4 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 32768 --kv-format fp8" > $OUT/w3.txt 2>&1
  echo "w3 $SECONDS s"; grep -A20 "^| shape" $OUT/w3.txt
fi
if [ $(left) -gt 60 ]; then
  AB_TIMEOUT=30 bash scripts/ab.sh /tmp/w3-main /tmp/w3-new8 2 -- \
    "-b 64 $G $S --kv-format fp8" "-b 256 $G $S --kv-format fp8" "-b 16 $G --kv-format fp8" \
    "-b 4 --lq 8 --causal --hq 32 --hkv 8 -d 64 --lk 32768 --kv-format fp8" \
    > $OUT/w3-8.txt 2>&1
  echo "w3-8 $SECONDS s"; grep -A12 "^| shape" $OUT/w3-8.txt
fi
if [ $(left) -gt 50 ]; then
  SPLITKV_COMMIT=5ae5a6a timeout $(( $(left) - 10 )) /tmp/skv bench --suite mixed --json $OUT/mixed.json > $OUT/mixed.txt 2>&1
  echo "mixed rc=$? $SECONDS s"; cut -c1-140 $OUT/mixed.txt
fi
echo "done $SECONDS s"
