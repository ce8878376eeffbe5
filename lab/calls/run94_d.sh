#!/usr/bin/env bash
# Run 94, call D: main's working tree with the scan, the route's active blocks, the route on by
# default and the stream kernel v2 on by default (twin blocks in more than one round).
# Carry ["build-r94d"]: gt.xz (GPU tests), cli.xz (CLI), sm_90a bf16 D=64;128 native;fp8.
#  1. every GPU test in 4 shards (the route now serves every paged varlen prefill test);
#  2. memcheck over the stream kernel's test and the route's mixes;
#  3. the mixed suite, all steps, with the cuDNN peer, merged into the table (issue 54's rows);
#  4. gpt-oss q_len 4 rows, default against --no-decode-stream (the plan each takes).
# Files under $OUT: mixed-ours.json, mixed-peers.json, mixed-latest.{json,md}, gptoss.tsv.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
bash lab/calls/gpu_test_shards.sh build-r94d/gt.xz '*' 240
echo "tests $SECONDS s"
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 /tmp/gt --gtest_filter='DecodeVariantsGpu.TheStreamKernel*:Mixes/MixedRoute*:MixedRouteHostile.*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | head
echo "memcheck $SECONDS s"
xz -dc build-r94d/cli.xz > /tmp/cli; chmod +x /tmp/cli
SPLITKV_COMMIT=${COMMIT:-run94d} timeout 240 /tmp/cli bench --suite mixed --json $OUT/mixed-ours.json > $OUT/mixed-ours.log 2>&1
echo "mixed rc=$? $SECONDS s"
timeout 150 python3 bench/peers.py --suite mixed --json $OUT/mixed-peers.json > $OUT/peers.log 2>&1
echo "peers rc=$? $SECONDS s"; tail -2 $OUT/peers.log
python3 bench/merge_results.py --suite mixed --ours $OUT/mixed-ours.json --peers $OUT/mixed-peers.json --out $OUT > $OUT/merge.log 2>&1
echo "merge rc=$?"; cat $OUT/mixed-latest.md 2>/dev/null | head -60
for r in 1 2; do
  for b in 128 256; do
    for f in "" "--no-decode-stream"; do
      us=$(bash lab/calls/bench_us.sh /tmp/cli --hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 --sinks -b $b $f)
      printf '%s\t%s\t%s\t%s\n' $r $b "${f:-default}" $us >> $OUT/gptoss.tsv
    done
  done
done
cat $OUT/gptoss.tsv
/tmp/cli plan --hq 64 --hkv 8 -d 64 --lq 4 --causal --lk 8192 --window 128 --sinks -b 256 | grep -E "^persistent|stream"
echo "done $SECONDS s"
