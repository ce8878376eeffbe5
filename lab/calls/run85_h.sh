#!/usr/bin/env bash
# Run 85, call H (the session's last device seconds; carry ["build-r85g"]): ncu with source counters
# on the gpt-oss window 128 + sinks decode rows, q_len 4 at B=64 (bf16: decode_mma_m32, 512 blocks,
# latency-bound; FP8: decode_quant 16-row, 1024 blocks, 0.98x FlexAttention): where a short block's
# time goes (stall reasons by SASS line), for the next design (persistent blocks, a 32-row FP8 tile).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-r85g/splitkv_v.xz > /tmp/v && chmod +x /tmp/v
G="-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks --iters 1"
for f in bf16 fp8; do
  [ $SECONDS -gt ${DEADLINE:-150} ] && break
  timeout 80 ncu --set full --import-source yes -k regex:decode -s 2 -c 1 -o $OUT/w128-$f /tmp/v bench $G --kv-format $f >/tmp/ncu-$f.log 2>&1
  echo "ncu $f rc=$? $SECONDS s"; grep -E "==ERROR|==WARNING" /tmp/ncu-$f.log | head -3
  ncu -i $OUT/w128-$f.ncu-rep --page details > $OUT/w128-$f-details.txt 2>&1
  ncu -i $OUT/w128-$f.ncu-rep --page source --csv --print-source sass > $OUT/w128-$f-source.csv 2>&1 || echo "no source page"
  grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|No Eligible|Memory Throughput|L2 Hit|Waves Per SM|Block Limit" $OUT/w128-$f-details.txt | head -16
done
ls -la $OUT; echo "done $SECONDS s"
