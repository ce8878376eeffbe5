#!/usr/bin/env bash
# Run 85, call C (one call, any H100 or H200; carry [".deps"]): builds on the device what run 85's
# calls A and 84-H carried (the build dirs did not survive the session): main's CLI (sm_90a, bf16,
# D=64 and 128, every format) and main + lab/patches/run84-splits-over-register-slots.patch (D=64,
# bf16, every format), in parallel. Then call A's interleaved A/B (splits over the registers'
# slots), then call 84-H's variants guard (our rows against variants-latest) with main's CLI.
# Both CLIs come back xz'd under $OUT for later calls. Predictions: as in run85_a.sh and run84_h.sh.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/rs && tar --exclude='./build*' --exclude=./.git -cf - . | (cd /tmp/rs && tar xf -)
(cd /tmp/rs && patch -p1 -s < lab/patches/run84-splits-over-register-slots.patch) || exit 1
cfg() { cmake -S "$1" -B "$1/build-c" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=OFF "-DSPLITKV_HEAD_DIMS=$2" -DSPLITKV_DTYPES=bf16 >/dev/null; }
cfg . "64;128" && cfg /tmp/rs 64 || exit 1
ninja -C build-c -j9 splitkv_cli >/tmp/b1.log 2>&1 & p1=$!
ninja -C /tmp/rs/build-c -j7 splitkv_cli >/tmp/b2.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build rc $r1 $r2 $SECONDS s"; [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -20 /tmp/b1.log /tmp/b2.log; exit 1; }
cp build-c/splitkv /tmp/old; cp /tmp/rs/build-c/splitkv /tmp/new
for b in old new; do strip -o /tmp/$b.s /tmp/$b && xz -T8 -6 -c /tmp/$b.s > $OUT/splitkv_$b.xz; done
t() { timeout 20 /tmp/$1 bench $2 --iters 30 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
while read -r r; do
  [ $SECONDS -gt 330 ] && break
  echo "old $(t old "$r") new $(t new "$r") new $(t new "$r") old $(t old "$r") | $r"
  echo "   splits old: $(/tmp/old plan $r | grep ^splits | cut -c1-60) new: $(/tmp/new plan $r | grep ^splits | cut -c1-60)"
done <<'R'
-b 128 --lq 1 --hq 28 --hkv 4 -d 64 --lk 8192 --kv-format int4 --softcap 30
-b 32 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4 --softcap 30
-b 16 --lq 4 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4 --causal
-b 32 --lq 4 --hq 32 --hkv 8 -d 64 --lk 8192 --kv-format int4 --causal
-b 32 --lq 2 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4 --causal
-b 16 --lq 8 --hq 32 --hkv 8 -d 64 --lk 32768 --kv-format int4 --causal
-b 32 --lq 4 --hq 28 --hkv 4 -d 64 --lk 32768 --kv-format int4 --causal
-b 64 --lq 1 --hq 64 --hkv 8 -d 64 --lk 8192 --kv-format int4
R
echo "ab done $SECONDS s"
timeout 130 /tmp/old bench --suite variants --json $OUT/variants-ours.json >/tmp/v.log 2>&1
echo "variants rc=$? $SECONDS s"
python3 - <<'P'
import json, math, os
def key(c): return json.dumps({k: v for k, v in c.items() if k not in ("family", "strategy", "splits")}, sort_keys=True)
def load(f): return {key(r["case"]): r for r in json.load(open(f))["rows"]}
latest = load("bench/results/variants-latest.json"); now = load(os.environ["OUT"] + "/variants-ours.json")
g = []
for k, r in latest.items():
    if k not in now or not now[k].get("us"): print("missing", k[:120]); continue
    q = r["us"] / now[k]["us"]; g.append(math.log(q)); c = json.loads(k)
    if q < 0.98 or q > 1.05:
        print(f"{q:.3f} latest {r['us']:.2f} now {now[k]['us']:.2f} B={c['B']} {c['Hq']}/{c['Hkv']} D={c['D']} q={c['Lq']} Lk={c['Lk']} {c['kv_format']} "
              f"w={c.get('window_left')} cap={c.get('softcap')} sinks={c.get('sinks')} tree={c.get('tree_mask')}")
print(f"variants rows {len(g)} geo latest/now {math.exp(sum(g)/len(g)):.3f} min {math.exp(min(g)):.3f}")
P
echo "done $SECONDS s"
