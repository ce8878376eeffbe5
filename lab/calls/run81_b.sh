#!/usr/bin/env bash
# Run 81, call B: no build. The mixed route's step (c) under ncu (HEAD, build-bin), then the prefill
# suite A/B/B/A in the full A/B config (build-ab: ebce4af = prefill-latest's commit, against new =
# HEAD's kernels). <= 8 files under $OUT.
set -uo pipefail
D=${DEADLINE:-540}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-bin/splitkv.xz > /tmp/cli && chmod +x /tmp/cli
SPLITKV_MIXED_ONLY=c timeout ${NCU_T:-120} ncu --metrics gpu__time_duration.sum --csv /tmp/cli bench --suite mixed --iters 1 >/tmp/ncu.csv 2>/tmp/ncu.err
echo "ncu rc=$? $SECONDS s"; tail -3 /tmp/ncu.err
python3 lab/calls/ncu_summary.py /tmp/ncu.csv > $OUT/ncu-c.txt; head -40 $OUT/ncu-c.txt
grep -m3 "Metric Unit\|gpu__time" /tmp/ncu.csv | cut -c1-300
DEADLINE=$(left) SUITE=prefill A=build-ab/splitkv_base.xz B=build-ab/splitkv_new.xz bash lab/calls/suite_ab.sh
