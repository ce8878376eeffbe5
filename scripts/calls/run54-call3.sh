#!/usr/bin/env bash
# Run 54, call 3: the decode suite with the peers and the quant suite on the D=128 bf16 build (the
# planner now takes decode_mma_n8 for <= 8 packed rows), then the split counts of the short q_len 1
# rows on it.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-carry/n8
SPLITKV_PREBUILT=$B SPLITKV_STEPS=decode,quant SPLITKV_STEP_TIMEOUT=300 SPLITKV_COMMIT=${1:-unknown} \
  bash scripts/gpu_check.sh > "$OUT/check.txt" 2>&1
tail -4 "$OUT/check.txt"; ls "$OUT"; cat "$OUT"/decode*.md 2>/dev/null | head -45 | cut -c1-220
for shape in "-b 1 --lk 16384" "-b 1 --lk 4096" "-b 8 --lk 8192"; do
  for s in 0 2 4 8 12 16 24; do
    us=$(timeout 30 $B/splitkv bench $shape --splits $s --json /tmp/s.json >/dev/null 2>&1 &&
         python3 -c 'import json; r=json.load(open("/tmp/s.json"))["rows"][0]; print(r["us"], r.get("splits", ""))')
    echo "$shape splits=$s: $us" | tee -a "$OUT/q1-splits.txt"
  done
done
