#!/usr/bin/env bash
# Run 95: the stream kernel under ncu at the gpt-oss row (64/8 heads, D=64, q_len 4, 8k, window 128
# + sinks, B=256): where its warps stall. Run 94 measured ~20 us per item at B=128 (one item per
# warp, 24.5 us), far above what its ~10 16-key sub-tiles should take; the question is whether the
# chain is memory latency (page-table load, then K/V), mma/shared-memory latency, or the tail.
# Carry ["build-r95"] (cli.xz). Files under $OUT: stream.ncu-rep, stream-source.csv, stream.txt.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r95/cli.xz > /tmp/cli && chmod +x /tmp/cli
A="--hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 --sinks -b 256"
timeout 200 ncu --set full --import-source yes -k regex:stream -s 10 -c 1 -o $OUT/stream /tmp/cli bench $A --iters 20 > /tmp/ncu.log 2>&1
echo "ncu rc=$? $SECONDS s"; tail -3 /tmp/ncu.log
timeout 60 ncu -i $OUT/stream.ncu-rep --print-details all > $OUT/stream.txt 2>&1
timeout 60 ncu -i $OUT/stream.ncu-rep --page source --csv --print-source sass > $OUT/stream-source.csv 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|DRAM Throughput|L2 Hit Rate|One or More Eligible|Warp Cycles Per Issued|Stall" $OUT/stream.txt | head -40
ls -la $OUT
echo "done $SECONDS s"
