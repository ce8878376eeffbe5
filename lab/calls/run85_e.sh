#!/usr/bin/env bash
# Run 85, call E (any H100/H200; carry [".deps", "build-r85"]): (1) main + both run-84 patches (the
# working tree: split rules over the registers' slots; a window's keys from a 16-key sub-tile edge)
# against main c6df5a8 (build-r85/splitkv_c6df5a8.xz) on D=128 quantized rows whose splits change
# (found by a plan sweep here; D=64 rows measured in call C); (2) c6df5a8 against 1c46349 (the
# variants-latest commit, built here from build-r85/src_1c46349.tgz) on the variants rows call C
# read 3-5% below variants-latest (same plans): a code change or the card?
# Predictions: (1) rows gaining splits faster, rows losing splits (INT4_kc softcap 3 -> 1) level or
# faster; (2) B=8 D=128 window 128 and B=1 q_len 4 rows level (the card), else a regression to find.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/base && tar xzf build-r85/src_1c46349.tgz -C /tmp/base && ln -sfn $PWD/.deps /tmp/base/.deps
cfg() { cmake -S "$1" -B "$1/build-e" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=OFF "-DSPLITKV_HEAD_DIMS=$2" -DSPLITKV_DTYPES=bf16 $3 >/dev/null; }
cfg . "64;128" "" && cfg /tmp/base "64;128" "-DSPLITKV_KV_FORMATS=native;fp8" || exit 1
ninja -C build-e -j11 splitkv_cli >/tmp/b1.log 2>&1 & p1=$!
ninja -C /tmp/base/build-e -j5 splitkv_cli >/tmp/b2.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build rc $r1 $r2 $SECONDS s"; [ $r1 -eq 0 ] || { tail -20 /tmp/b1.log; exit 1; }
xz -dc build-r85/splitkv_c6df5a8.xz > /tmp/old; cp build-e/splitkv /tmp/new; cp /tmp/base/build-e/splitkv /tmp/base_cli 2>/dev/null; chmod +x /tmp/old
python3 - > /tmp/sweep.txt <<'P'
import subprocess, itertools, re
def splits(b, a):
    o = subprocess.run([b, "plan"] + a.split(), capture_output=True, text=True).stdout
    m = re.search(r"^splits: (\d+)", o, re.M); f = re.search(r"^family: (\S+)", o, re.M)
    return (m.group(1) if m else "?") + "/" + (f.group(1) if f else "?")
for fmt, (hq, hkv), lq, B, lk, var in itertools.product(["int4", "int4_kc", "k8v4_kc"], [(32, 8), (28, 4), (64, 8)], [1, 4],
        [8, 16, 32, 64, 128], [8192, 32768], ["", "--softcap 30", "--window 4096,-1"]):
    a = f"-b {B} --lq {lq} --hq {hq} --hkv {hkv} -d 128 --lk {lk} --kv-format {fmt} {'--causal' if lq > 1 else ''} {var}"
    o, n = splits("/tmp/old", a), splits("/tmp/new", a)
    if o != n: print(f"{o} -> {n} | {a}")
P
echo "sweep $SECONDS s: $(wc -l < /tmp/sweep.txt) D=128 shapes change"; head -40 /tmp/sweep.txt
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
# up to 4 rows losing splits and 4 gaining, spread over formats
{ awk -F'[/ ]' '$1 > $4' /tmp/sweep.txt | awk 'NR % 3 == 1' | head -4; awk -F'[/ ]' '$1 < $4' /tmp/sweep.txt | awk 'NR % 5 == 1' | head -4; } | sed 's/.*| //' > /tmp/rows.txt
while read -r r; do
  [ $SECONDS -gt 380 ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
done < /tmp/rows.txt
echo "ab done $SECONDS s"
if [ $r2 -eq 0 ]; then
G="--hq 64 --hkv 8 -d 64 --lk 8192"
while read -r r; do
  [ $SECONDS -gt 540 ] && break
  echo "base $(t base_cli "$r") main $(t old "$r") main $(t old "$r") base $(t base_cli "$r") | $r"
done <<R
-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768 --window 128,-1
-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 131072 --window 128,-1
-b 1 --lq 4 --causal $G --window 128,-1 --sinks
-b 1 --lq 4 --causal $G --window 128,-1 --sinks --kv-format fp8
-b 8 --lq 1 --hq 32 --hkv 8 -d 128 --lk 32768
-b 64 --lq 1 $G --window 128,-1 --sinks
R
else tail -5 /tmp/b2.log; fi
echo "done $SECONDS s"
