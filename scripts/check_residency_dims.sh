#!/usr/bin/env bash
# The resident-block check (scripts/check_residency.py) for head dims the main build does not
# compile. A build of D=128 only (CI's) cannot see the registers of the D=64 decode kernels that
# gpt-oss-shaped rows run, where a change to shared decode code can lift an instance past the
# blocks per SM its plans count. This configures a second build of those head dims for sm_90a,
# compiles only its decode kernels' objects, and checks them with the main build's CLI as the
# planner (the planner's tile table covers every head dim).
#   scripts/check_residency_dims.sh [HEAD_DIMS]   (default 64; the main build: $SPLITKV_BUILD_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
DIMS=${1:-64}
MAIN=${SPLITKV_BUILD_DIR:-build}
OUT="$MAIN-residency-d${DIMS//;/-}"
PYTHON=${PYTHON:-python3}

if ! command -v ninja >/dev/null; then
  echo "check_residency_dims: no ninja: skipped (the object targets are named by the Ninja generator)"
  exit 0
fi
CUOBJDUMP=$(command -v cuobjdump || ls .deps/cuobjdump/nvidia/*/bin/cuobjdump 2>/dev/null | head -1 || true)
if [[ -z $CUOBJDUMP ]]; then
  echo "check_residency_dims: no cuobjdump (scripts/test.sh installs one): skipped"
  exit 0
fi
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_HEAD_DIMS="$DIMS" -DSPLITKV_DTYPES=bf16 -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=OFF >/dev/null
# The decode kernels' instantiation objects (decode_mma*, decode_quant*, decode_kc*) of these dims.
mapfile -t objects < <(ninja -C "$OUT" -t targets all |
  sed -n 's#^\(CMakeFiles/splitkv.dir/generated/instantiations/decode_[a-z0-9_]*_hd[0-9]*_[a-z0-9_]*\.cu\.o\):.*#\1#p')
if (( ${#objects[@]} == 0 )); then
  echo "check_residency_dims: no decode kernel objects for head dims $DIMS"
  exit 1
fi
ninja -C "$OUT" -j "${SPLITKV_JOBS:-$(nproc)}" "${objects[@]}" >/dev/null
"$PYTHON" scripts/check_residency.py "$MAIN/splitkv" --cuobjdump "$CUOBJDUMP" \
  --kernels-from "${objects[@]/#/$OUT/}"
