#!/usr/bin/env bash
# Run 90, issue 54: decode blocks that read no key (zero-length sequences, splits past a sequence's
# end; the mixed route's slots past its members) write O = 0, LSE = -inf and return before the key
# loop and the warp merge (block_reads_no_key). carry ["build-mx"]: base.xz = HEAD's CLI, new.xz =
# HEAD + the change, gt.xz = its GPU tests (sm_90a bf16 D=128, native + fp8).
#  1. GPU tests: decode, quant decode, variants, sinks, mixed route, chunked, promises,
#     adversarial. Expected: all pass.
#  2. Mixed suite (c) and (b), base / new / base / new. Prediction (H200, from run 89's ncu: 2048
#     empty blocks ~55 us of the FP8 speculative part's 224): FP8 (c) 464 -> 435-450 us, bf16 (c)
#     761 -> 735-750; (b) within +-1% (its parts have 0-8 empty slots per KV head... 8 chunks).
#  3. Decode rows without empty blocks, A/B two rounds: level (+-1%).
# Files under $OUT: mx-{base,new}{1,2}-{c,b}.json (8 at most), ab.txt.
set -uo pipefail
D=${DEADLINE:-540}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-mx/gt.xz \
  '*Decode*:*Mixed*:*Variants*:*Sinks*:*Chunked*:PromisesGpu.*:AdversarialGpu.*' ${MX_TEST_LIMIT:-150}
echo "tests $SECONDS s"
for b in base new; do xz -dc build-mx/$b.xz > /tmp/mx-$b && chmod +x /tmp/mx-$b; done
for step in c b; do
  for r in 1 2; do
    for b in base new; do
      [ $(left) -gt 120 ] || break 3
      SPLITKV_MIXED_ONLY=$step timeout 60 /tmp/mx-$b bench --suite mixed \
        --json $OUT/mx-$b$r-$step.json > /tmp/mx-$b$r-$step.txt 2>&1
      echo "== $b $r $step rc=$? $SECONDS s"; grep -E "mixed route|separate  " /tmp/mx-$b$r-$step.txt | cut -c1-140
    done
  done
done
[ $(left) -gt 60 ] && AB_TIMEOUT=30 bash scripts/ab.sh /tmp/mx-base /tmp/mx-new 2 -- \
  "-b 1 --lk 1024" "-b 8 --lk 32768" "-b 64 --lk 8192 --page-size 16" "-b 1 --lk 1024 --kv-format fp8" \
  "-b 8 --lk 32768 --kv-format fp8" "-b 32 --lq 4 --causal --lk 8192 --page-size 16 --kv-format fp8" \
  > $OUT/ab.txt 2>&1
grep -A10 "^| shape" $OUT/ab.txt
echo "done $SECONDS s"
