#!/usr/bin/env bash
# Run 82, call C: (1) the D=64 variants GPU tests with the route test's skip (build-d64/);
# (2) the two variants rows under 0.97x of variants-latest (1c46349 vs main, wide builds): graph
# timing A/B/B/A and ncu per kernel; (3) main's prefill suite (build-bin, CI config) with the hang
# watchdog at 60 s, to see whether the hang ebce4af's suite met twice is main's too.
set -uo pipefail
D=${DEADLINE:-330}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-d64/splitkv_gpu_tests.xz > /tmp/gt64 && chmod +x /tmp/gt64
timeout 90 /tmp/gt64 --gtest_filter='*Variants*:*Sinks*' >/tmp/gt64.log 2>&1
echo "d64 rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' /tmp/gt64.log | tr '\n' ' ')"
grep -h -A6 "Failure" /tmp/gt64.log | head -20
xz -dc build-ab/splitkv_1c46349.xz > /tmp/old && xz -dc build-ab/splitkv_wide.xz > /tmp/new && chmod +x /tmp/old /tmp/new
R1="-b 8 --lk 32768 --window 128,-1"
R2="-b 1 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks"
for r in "$R1" "$R2"; do
  for c in old new new old; do echo "$c [$r]: $(timeout 30 /tmp/$c bench $r --iters 200 2>&1 | tail -1 | cut -c60-170)"; done
  for c in old new; do
    timeout 60 ncu --metrics gpu__time_duration.sum --csv /tmp/$c bench $r --iters 3 >/tmp/ncu.csv 2>/dev/null
    echo "== ncu $c [$r]"; python3 lab/calls/ncu_summary.py /tmp/ncu.csv | grep -v fill_random | tail -5
  done
done
echo "rows done $SECONDS s"
xz -dc build-bin/splitkv.xz > /tmp/main && chmod +x /tmp/main
SPLITKV_BENCH_HANG_S=60 timeout $(( $(left) - 5 )) /tmp/main bench --suite prefill --json $OUT/prefill-main.json >/tmp/p.log 2>&1
echo "prefill suite rc=$? $SECONDS s"; tail -25 /tmp/p.log | cut -c1-150
echo "done $SECONDS s"
