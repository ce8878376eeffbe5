#!/usr/bin/env bash
# Run 83, call D (the session's last seconds): on an H200, the quant suite once with HEAD's CI
# CLI against quant-latest (issue 55's speed guard); on another card, ncu of the gpt-oss window
# decode rows' kernels (second version; the first timed the peers of the causal decode rows).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
case "$GPU" in
  *H200*)
    xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
    bash lab/calls/quant_guard.sh /tmp/skv 0a31e86 $OUT/quant-1.json
    ;;
  *)  # the gpt-oss window 128 + sinks decode rows' kernels under ncu (main's wide CLI)
    xz -dc build-ab/splitkv_wide.xz > /tmp/w && chmod +x /tmp/w
    M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
    M=$M,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active
    for q in 1 4; do
      a="-b 64 --lq $q --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks"; [ $q -gt 1 ] && a="$a --causal"
      echo "== q_len $q"
      timeout 60 ncu --kernel-name regex:decode -c 3 --metrics $M --csv /tmp/w bench $a --iters 2 2>/dev/null \
        | awk -F'","' 'NR>1{print $5 " | " $(NF-2) " " $NF}' | cut -c1-160 | tail -12
    done
    ;;
esac
echo "done $SECONDS s"
