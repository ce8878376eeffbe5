#!/usr/bin/env bash
# Run 51: where does decode served by prefill_sm90_gqa64 (planned splits) beat the decode kernels?
# Packed rows q_len x group in (16, 64], batches and lengths around the suite's B=8 8k rows.
set -u
C=build-carry
us() {
  rm -f /tmp/row.json
  timeout 60 $C/splitkv-new bench "$@" --json /tmp/row.json > /dev/null 2>&1 || { echo "rc=$?"; return; }
  python3 -c 'import json; r = json.load(open("/tmp/row.json"))["rows"][0]; print(r["us"], "splits", r.get("splits", ""))'
}
for heads in "--hq 28 --hkv 4 --lq 8" "--hq 28 --hkv 4 --lq 6" "--hq 28 --hkv 4 --lq 5" "--hq 8 --hkv 1 --lq 8" \
             "--hq 64 --hkv 8 --lq 8" "--hq 32 --hkv 8 --lq 8" "--hq 28 --hkv 4 --lq 4" "--hq 32 --hkv 4 --lq 6"; do
  for bl in "-b 1 --lk 8192" "-b 1 --lk 32768" "-b 4 --lk 8192" "-b 8 --lk 2048" "-b 8 --lk 8192" "-b 8 --lk 32768" "-b 32 --lk 4096" "-b 8 --lk 8192 --page-size 16"; do
    echo "$heads $bl: decode $(us $bl --causal $heads) | gqa64 $(us $bl --causal $heads --family prefill_sm90_gqa64)" | tee -a $OUT/sweep.txt
  done
done
