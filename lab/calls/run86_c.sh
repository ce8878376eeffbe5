#!/usr/bin/env bash
# Run 86, call C (any H100/H200; before it: scripts/device_deps.sh and
#   mkdir -p build-src && git archive -o build-src/src_1c46349.tgz 1c46349
# then carry [".deps", "build-src"]): ncu with source counters where short decode blocks spend their
# time. Builds main (sm_90a bf16 D=64/128 native + FP8) and 1c46349 (D=128 native) here, then:
#  (1) gpt-oss window 128 + sinks q_len 4 B=64, bf16 (decode_mma_m32) and FP8 (decode_quant): stall
#      reasons by SASS line (the ~11 us a round of blocks takes at 2-3 blocks per SM);
#  (2) B=1 32/8 D=128 q_len 4 8k window 128 + sinks (R2 of run 85's bisect: 7.13 us at 1c46349,
#      7.39 at main): instruction-fetch stalls (no_instruction, branch_resolving) in both, to test
#      the hypothesis that the cold-L2 harness makes the executed code's size and layout cost.
# Per profile, its details page and its per-SASS-line source page come back under $OUT (8 files).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/base && tar xzf build-src/src_1c46349.tgz -C /tmp/base && ln -sfn $PWD/.deps /tmp/base/.deps
cmake -S . -B build-c -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DSPLITKV_BUILD_TESTS=OFF \
  -DSPLITKV_BUILD_PYTHON=OFF "-DSPLITKV_HEAD_DIMS=64;128" -DSPLITKV_DTYPES=bf16 "-DSPLITKV_KV_FORMATS=native;fp8" >/dev/null || exit 1
cmake -S /tmp/base -B /tmp/base/build-c -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=OFF -DSPLITKV_HEAD_DIMS=128 -DSPLITKV_DTYPES=bf16 \
  -DSPLITKV_KV_FORMATS=native >/dev/null || exit 1
ninja -C build-c -j10 splitkv_cli >/tmp/b1.log 2>&1 & p1=$!
ninja -C /tmp/base/build-c -j6 splitkv_cli >/tmp/b2.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build rc $r1 $r2 $SECONDS s"; [ $r1 -eq 0 ] || { tail -20 /tmp/b1.log; exit 1; }
prof() {  # name cli args...
  local name=$1 cli=$2; shift 2
  timeout 90 ncu --set full --import-source yes -k regex:decode -s 2 -c 1 -o /tmp/$name $cli bench "$@" --iters 1 >/tmp/ncu-$name.log 2>&1
  echo "ncu $name rc=$? $SECONDS s"; grep -E "==ERROR" /tmp/ncu-$name.log | head -2
  ncu -i /tmp/$name.ncu-rep --page details > $OUT/$name-details.txt 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|No Eligible|Memory Throughput|L2 Hit|Block Limit" $OUT/$name-details.txt | head -12
  # per SASS line: executed instructions and warp stall samples by reason
  ncu -i /tmp/$name.ncu-rep --page source --csv --print-source sass > $OUT/$name-source.csv 2>&1 || echo "no source page"
  head -c 300 $OUT/$name-source.csv; echo
}
G="-b 64 --lq 4 --causal --hq 64 --hkv 8 -d 64 --lk 8192 --window 128,-1 --sinks"
prof w128-bf16 build-c/splitkv $G
prof w128-fp8 build-c/splitkv $G --kv-format fp8
R2="-b 1 --lq 4 --causal --hq 32 --hkv 8 -d 128 --lk 8192 --window 128,-1 --sinks"
prof r2-main build-c/splitkv $R2
[ $r2 -eq 0 ] && prof r2-base /tmp/base/build-c/splitkv $R2
ls $OUT; echo "done $SECONDS s"
