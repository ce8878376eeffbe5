#!/usr/bin/env bash
# Run 85, call G (an H100, as variants-latest's; carry ["build-r85g"]): variants-latest refreshed:
# our variants suite with main (build-r85g/splitkv_v.xz: sm_90a bf16 D=64/128 native + FP8), then
# FlexAttention on the same rows in the same run (bench/peers_flex.py, --resume until done or out
# of time), merged (bench/merge_results.py --suite variants) into $OUT/merged/.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
xz -dc build-r85g/splitkv_v.xz > /tmp/v && chmod +x /tmp/v
SPLITKV_COMMIT=${SPLITKV_COMMIT:-main} timeout 120 /tmp/v bench --suite variants --json $OUT/variants-ours.json >/tmp/v.log 2>&1
echo "ours rc=$? $SECONDS s"
for i in 1 2 3 4; do
  T=$(( ${DEADLINE:-400} - SECONDS - 25 )); [ $T -lt 30 ] && break
  timeout $T python3 bench/peers_flex.py --suite variants --json $OUT/variants-flex.json --resume --max-seconds $((T - 10)) >/tmp/f.log 2>&1
  rc=$?; echo "flex pass $i rc=$rc $SECONDS s"; [ $rc -eq 0 ] && break
done
tail -3 /tmp/f.log
python3 bench/merge_results.py --suite variants --ours $OUT/variants-ours.json --peers $OUT/variants-flex.json --out $OUT/merged >/tmp/m.log 2>&1
echo "merge rc=$? $SECONDS s"; tail -3 /tmp/m.log; ls $OUT/merged 2>/dev/null
[ -f $OUT/merged/variants-latest.md ] && head -80 $OUT/merged/variants-latest.md
