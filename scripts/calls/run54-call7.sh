#!/usr/bin/env bash
# Run 54, call 7: the cluster merge on the rows planned with 2-4 splits (call 6: B=8 8k, 2 splits,
# 1.0% faster in clusters of 2), interleaved with the planned combine kernel, four rounds.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-carry/n8/splitkv
cat > /tmp/cluster.sh <<EOS
#!/usr/bin/env bash
exec $PWD/$B "\$@" --cluster
EOS
chmod +x /tmp/cluster.sh
AB_OUT=$OUT/ab-cluster2.txt AB_TIMEOUT=40 bash scripts/ab.sh $B /tmp/cluster.sh 4 -- \
  "-b 8 --lk 8192" "-b 8 --lk 16384" "-b 8 --lk 32768" "-b 8 --lk 131072" "-b 8 --lk 32768 --page-size 16" \
  "-b 4 --lk 16384" "-b 12 --lk 8192" 2>&1 | tail -10
