#!/usr/bin/env bash
# Run 51: speculative rows with more than 64 packed rows per KV head: the decode kernels (planned)
# against chunked prefill on the 64-row (prefill_sm90_gqa64) and 128-row (prefill_sm90_gqa) tiles.
set -u
B=build-carry/splitkv-regs
us() {
  rm -f /tmp/row.json
  timeout 60 $B bench "$@" --json /tmp/row.json > /dev/null 2>&1 || { echo "rc=$?"; return; }
  python3 -c 'import json; r = json.load(open("/tmp/row.json"))["rows"][0]; print(r["us"], "s" + str(r.get("splits", "")))'
}
for heads in "--hq 28 --hkv 4 --lq 16" "--hq 28 --hkv 4 --lq 12" "--hq 32 --hkv 4 --lq 16" "--hq 64 --hkv 8 --lq 16" \
             "--hq 16 --hkv 2 --lq 10" "--hq 8 --hkv 1 --lq 16"; do
  for bl in "-b 8 --lk 8192" "-b 8 --lk 32768" "-b 1 --lk 32768" "-b 32 --lk 4096"; do
    echo "$heads $bl: decode $(us $bl --causal $heads) | gqa64 $(us $bl --causal $heads --family prefill_sm90_gqa64) | gqa128 $(us $bl --causal $heads --family prefill_sm90_gqa)" | tee -a $OUT/wide.txt
  done
done
