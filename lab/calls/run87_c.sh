#!/usr/bin/env bash
# Run 87, call C (H200 preferred; carry ["build-bin"]): the CI-configuration binaries of main
# 0551d5a (build-bin/splitkv.xz, build-bin/gt.xz: sm_90a bf16 D=64/128, every format).
# 1. The adversarial and promise GPU tests: the first GPU run of the harness's to_device (sinks,
#    tree masks and page tables moved to the device; e683388, 0551d5a).
# 2. On an H200: the quant suite against quant-latest (issue 55's speed guard, every row >= 0.98x).
# 3. variants-latest refreshed with FlexAttention in the same run (the FP8 q_len 1 rows moved with
#    597fe27; issue 53's targets are on the H200).
set -uo pipefail
D=${DEADLINE:-560}
left() { echo $(( D - SECONDS )); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
bash lab/calls/gpu_test_shards.sh build-bin/gt.xz 'AdversarialGpu.*:PromisesGpu.*' 100
echo "tests $SECONDS s"
xz -dc build-bin/splitkv.xz > /tmp/skv && chmod +x /tmp/skv
case "$GPU" in
  *H200*)
    bash lab/calls/quant_guard.sh /tmp/skv 0551d5a $OUT/quant-1.json
    ;;
esac
SPLITKV_COMMIT=0551d5a timeout 120 /tmp/skv bench --suite variants --json $OUT/variants-ours.json >/tmp/v.log 2>&1
echo "variants ours rc=$? $SECONDS s"
for i in 1 2 3 4; do
  T=$(( $(left) - 20 )); [ $T -lt 30 ] && break
  timeout $T python3 bench/peers_flex.py --suite variants --json $OUT/variants-flex.json --resume --max-seconds $((T - 10)) >/tmp/f.log 2>&1
  rc=$?; echo "flex pass $i rc=$rc $SECONDS s"; [ $rc -eq 0 ] && break
done
tail -3 /tmp/f.log | cut -c1-200
mkdir -p $OUT/merged  # added after call C, whose merge failed for the lack of it (merged on the host)
python3 bench/merge_results.py --suite variants --ours $OUT/variants-ours.json --peers $OUT/variants-flex.json --out $OUT/merged >/tmp/m.log 2>&1
echo "merge rc=$? $SECONDS s"; tail -3 /tmp/m.log; ls $OUT/merged 2>/dev/null
[ -f $OUT/merged/variants-latest.md ] && grep -E "gpt-oss|window|softcap" $OUT/merged/variants-latest.md | cut -c1-200 | head -40
echo "done $SECONDS s"
