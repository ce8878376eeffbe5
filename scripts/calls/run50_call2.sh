#!/usr/bin/env bash
# Run 50, second GPU call: (1) A/B of the combine change, main's CLI against the branch's, on
# rows with splits; (2) the speculative rows as chunked prefill on prefill_sm90_gqa64 (forced
# splits) next to the decode kernels, same binary.
set -u
C=build-carry
S=("-b 8 --hq 28 --hkv 4 --lk 8192 --lq 2 --causal" "-b 8 --hq 28 --hkv 4 --lk 8192 --lq 4 --causal"
   "-b 8 --hq 28 --hkv 4 --lk 8192 --lq 8 --causal" "-b 8 --lk 8192 --lq 2 --causal" "-b 8 --lk 8192 --lq 4 --causal"
   "-b 8 --lk 8192 --lq 8 --causal" "-b 8 --lk 8192" "-b 1 --lk 16384" "-b 1 --lk 131072" "-b 1 --lk 1024"
   "-b 8 --lk 8192 --kv-format int4" "-b 8 --lk 8192 --lq 4 --causal --kv-format k8v4"
   "-b 8 --hq 28 --hkv 4 --lk 8192 --lq 4 --causal --fused-combine")
AB_OUT=$OUT/ab-combine.txt AB_TIMEOUT=60 scripts/ab.sh $C/splitkv-main $C/splitkv-new 3 -- "${S[@]}" | tail -16
P="--mode prefill --kv-cache --causal --family prefill_sm90_gqa64"
us() {  # µs of one bench run (first row of its JSON), or its exit code
  rm -f /tmp/row.json
  timeout 60 $C/splitkv-new bench "$@" --json /tmp/row.json > /dev/null 2>&1 || { echo "rc=$?"; return; }
  python3 -c 'import json; r = json.load(open("/tmp/row.json"))["rows"][0]; print(r["us"], r.get("splits", ""))'
}
# Decode rows served by chunked prefill (--family names a prefill family: run_decode's own path,
# combine included), forced splits, next to the planned decode row; one prefill-mode cross-check.
for shape in "--hq 28 --hkv 4 --lq 2" "--hq 28 --hkv 4 --lq 4" "--hq 28 --hkv 4 --lq 8" "--hq 32 --hkv 8 --lq 4" "--hq 32 --hkv 8 --lq 8"; do
  for s in 4 8 16; do
    echo "decode via gqa64 $shape splits $s: $(us -b 8 --lk 8192 --causal $shape --family prefill_sm90_gqa64 --splits $s)" | tee -a $OUT/gqa64.txt
  done
  echo "decode planned $shape: $(us -b 8 --lk 8192 --causal $shape)" | tee -a $OUT/gqa64.txt
done
echo "prefill-mode gqa64 28/4 q8 splits 8: $(us $P -b 8 --lk 8192 --hq 28 --hkv 4 --lq 8 --splits 8)" | tee -a $OUT/gqa64.txt
for shape in "--hq 28 --hkv 4 --lq 8" "--hq 32 --hkv 8 --lq 8"; do
  echo "decode via gqa64 page16 $shape splits 8: $(us -b 8 --lk 8192 --causal $shape --family prefill_sm90_gqa64 --splits 8 --page-size 16)" | tee -a $OUT/gqa64.txt
done
# The same INT4/K8V4/bf16 rows over a token-major and a head-major cache, interleaved (3 rounds).
for round in 1 2 3; do
  for shape in "-b 8 --lk 32768 --kv-format int4" "-b 1 --lk 131072 --kv-format int4" "-b 8 --lk 8192 --kv-format int4" \
               "-b 8 --lk 32768 --kv-format k8v4" "-b 8 --lk 32768" "-b 1 --lk 131072 --page-size 16 --kv-format int4"; do
    echo "layout round $round $shape: token-major $(us $shape) head-major $(us $shape --kv-head-major)" | tee -a $OUT/layout.txt
  done
done
