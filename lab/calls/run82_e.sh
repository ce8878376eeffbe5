#!/usr/bin/env bash
# Run 82, call E: the variants-prefill suite of main (build-new/, after a warm row) and
# FlexAttention on its rows in the same call (bench/peers_flex.py, resumed in a fresh process if
# one dies), then FlexAttention on the decode variants suite's q_len 4 rows (gpt-oss and tree
# rows) while time is left. Four JSONs under $OUT.
set -uo pipefail
D=${DEADLINE:-400}
left() { echo $(( D - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
xz -dc build-new/splitkv.xz > /tmp/new && chmod +x /tmp/new
W="--mode prefill -b 1 --hq 16 --hkv 16 --lq 16384 --lk 16384 --causal --iters 20"
timeout 30 /tmp/new bench $W >/dev/null 2>&1
SPLITKV_COMMIT=$(git rev-parse --short HEAD) timeout 90 /tmp/new bench --suite variants-prefill --json $OUT/vp-ours.json >/tmp/vp.log 2>&1
echo "ours rc=$? $SECONDS s"; tail -8 /tmp/vp.log | cut -c1-160
for try in 1 2 3; do
  [ $(left) -lt 60 ] && break
  timeout $(( $(left) - 120 )) python3 bench/peers_flex.py --suite variants-prefill --json $OUT/vp-flex.json --resume \
    --max-seconds $(( $(left) - 140 )) >>/tmp/flex.log 2>&1 && break
done
echo "flex prefill $SECONDS s"; grep -E "flex" /tmp/flex.log | tail -8 | cut -c1-160
if [ $(left) -gt 70 ]; then
  timeout $(( $(left) - 10 )) python3 bench/peers_flex.py --suite variants --filter "q_len=4" --json $OUT/v-flex-q4.json \
    --resume --max-seconds $(( $(left) - 40 )) >/tmp/flex2.log 2>&1
  echo "flex decode q4 rc=$? $SECONDS s"; grep -E "flex" /tmp/flex2.log | tail -12 | cut -c1-160
fi
echo "done $SECONDS s"
