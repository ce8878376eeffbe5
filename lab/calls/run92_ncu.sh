#!/usr/bin/env bash
# Run 92: FP8 B=1 4k under ncu, 31f9961 against HEAD (smem), the decode kernel only (full set).
# Carry ["build-r92"]. Files under $OUT: ncu-q31.txt, ncu-smem.txt.
set -uo pipefail
xz -dc build-r92/q31-splitkv.xz > /tmp/f-q31; xz -dc build-r92/smem.xz > /tmp/f-smem; chmod +x /tmp/f-*
for c in q31 smem; do
  timeout 120 ncu --set full -k regex:'quant' -s 20 -c 1 /tmp/f-$c bench --kv-format fp8 --lk 4096 --iters 30 > $OUT/ncu-$c.txt 2>&1
  echo "$c rc=$?"
  grep -E "^  [a-z_:<>]*quant|Duration|Elapsed Cycles|Executed Ipc A|Issued Instructions|Registers Per|Achieved Occupancy|L2 Hit Rate|Mem Busy|DRAM Throughput|One or More Eligible|Warp Cycles Per Issued" $OUT/ncu-$c.txt | head -20
done
echo "done $SECONDS s"
