#!/usr/bin/env bash
# Run 96, call B, on an H200: issue 53's two suites in one call, our rows first, then FlexAttention
# on the variants suite's rows with the time left (merged on the host: bench/merge_results.py).
# The CLI: build-r96b/cli.xz (HEAD 6a50b27: both stream kernels as defaults; every format,
# D 64;128, prefill_sm90 included). Set COMMIT to the commit that holds those sources.
# Predictions (H200): gpt-oss q_len 4 window 128 + sinks bf16 B=256 and B=128 ~1.3-1.6x faster
# than variants-latest (H100, block twin); every other decode row level; window 4096 over 16k
# causal at 0.90-0.92x our dense causal rate per visible pair (run 89: 0.909).
# Files under $OUT: variants-ours.json, vp-ours.json, variants-flex.json.
set -uo pipefail
D=${DEADLINE:-560}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc ${CLI:-build-r96b/cli.xz} > /tmp/skv && chmod +x /tmp/skv
C=${COMMIT:?set COMMIT to the commit whose sources the CLI holds}
SPLITKV_COMMIT=$C timeout 150 /tmp/skv bench --suite variants --json $OUT/variants-ours.json >/tmp/v.log 2>&1
echo "variants ours rc=$? $SECONDS s"; grep -E "64/8.*(B=256|B=128).*window" /tmp/v.log | cut -c1-160 | head -6
timeout 30 /tmp/skv bench --mode prefill -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 --causal --iters 20 >/dev/null 2>&1
SPLITKV_COMMIT=$C timeout 110 /tmp/skv bench --suite variants-prefill --json $OUT/vp-ours.json >/tmp/vp.log 2>&1
echo "variants-prefill ours rc=$? $SECONDS s"; grep -E "window|softcap|causal" /tmp/vp.log | cut -c1-160 | head -8
for i in 1 2 3; do
  T=$(( $(left) - 15 )); [ $T -lt 30 ] && break
  timeout $T python3 bench/peers_flex.py --suite variants --json $OUT/variants-flex.json --resume \
    --max-seconds $((T - 10)) >/tmp/f.log 2>&1
  rc=$?; echo "flex pass $i rc=$rc $SECONDS s"; [ $rc -eq 0 ] && break
done
tail -3 /tmp/f.log | cut -c1-200
echo "done $SECONDS s"
