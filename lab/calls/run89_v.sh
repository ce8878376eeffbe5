#!/usr/bin/env bash
# Run 89, call V (carry ["build-head/splitkv.xz"]: HEAD 9cd3106's CLI, CI configuration): on an
# H200, the issue 53 targets' card (also carry build-w3/main.xz),
#  1. the variants-prefill suite (after a warm row) and FlexAttention on its rows in the same call
#     (window prefill >= 0.9x dense causal per visible pair and >= 1.5x Flex; softcap rows);
#  2. the quant suite twice more (issue 55's guard: is INT4 B=1 64k token-major, 0.945x of
#     quant-latest in this session's first call while its 128k twin ran 1.07x, bimodal?);
#  3. the variants suite's D=64 rows (build-w3/main.xz: 39546cc's sm_90a bf16 D=64 native + fp8
#     CLI, before the no-fold twin) and FlexAttention on its q_len 4 rows while time is left.
# Files under $OUT: vp-ours.json, vp-flex.json, quant-2.json, quant-3.json, v-ours.json, v-flex-q4.json.
set -uo pipefail
D=${DEADLINE:-540}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc build-head/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
C=$(git rev-parse --short HEAD)
W="--mode prefill -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 --causal --iters 20"
timeout 30 /tmp/skv bench $W >/dev/null 2>&1
SPLITKV_COMMIT=$C timeout 100 /tmp/skv bench --suite variants-prefill --json $OUT/vp-ours.json >/tmp/vp.log 2>&1
echo "ours rc=$? $SECONDS s"; grep -E "window|softcap|causal" /tmp/vp.log | cut -c1-160 | head -12
for try in 1 2; do
  [ $(left) -lt 200 ] && break
  timeout 150 python3 bench/peers_flex.py --suite variants-prefill --json $OUT/vp-flex.json --resume \
    --max-seconds 130 >>/tmp/flex.log 2>&1 && break
done
echo "flex prefill $SECONDS s"; grep -E "flex|µs|us" /tmp/flex.log | tail -8 | cut -c1-160
for i in 2 3; do
  [ $(left) -gt 150 ] || break
  bash lab/calls/quant_guard.sh /tmp/skv $C $OUT/quant-$i.json
done
if [ $(left) -gt 120 ]; then
  xz -dc build-w3/main.xz > /tmp/w3 && chmod +x /tmp/w3
  SPLITKV_COMMIT=39546cc timeout 60 /tmp/w3 bench --suite variants --json $OUT/v-ours.json >/tmp/v.log 2>&1
  echo "variants rc=$? $SECONDS s"
  timeout $(( $(left) - 10 )) python3 bench/peers_flex.py --suite variants --filter "q_len=4" --json $OUT/v-flex-q4.json \
    --resume --max-seconds $(( $(left) - 40 )) >/tmp/flex2.log 2>&1
  echo "flex decode q4 rc=$? $SECONDS s"; grep -E "flex" /tmp/flex2.log | tail -12 | cut -c1-160
fi
echo "done $SECONDS s"
