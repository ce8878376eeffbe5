#!/usr/bin/env bash
# The Python package on a GPU machine (torch, nanobind, numpy and pytest installed; no network
# needed, CUTLASS in .deps/): builds the module and the CLI with CMake for sm_90a (bf16, D=128
# unless SPLITKV_HEAD_DIMS / SPLITKV_DTYPES / CMAKE_CUDA_ARCHITECTURES say otherwise), runs
# tests/python (the GPU tests included) and python/bench_overhead.py, and writes the logs and
# python-overhead.json to $OUT (default build-py/out). Prints a summary line last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build-py/out}
BUILD=${SPLITKV_PY_BUILD_DIR:-build-py}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
"$PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA')" 2>&1

start=$SECONDS
if ! cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90a}" \
    -DSPLITKV_HEAD_DIMS="${SPLITKV_HEAD_DIMS:-128}" -DSPLITKV_DTYPES="${SPLITKV_DTYPES:-bf16}" \
    -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
    >"$OUT/configure.log" 2>&1; then
  tail -40 "$OUT/configure.log"
  echo "SUMMARY: configure failed"
  exit 1
fi
if ! cmake --build "$BUILD" --target _splitkv splitkv_cli --parallel "${SPLITKV_JOBS:-$(nproc)}" >"$OUT/build.log" 2>&1; then
  grep -m 20 -B 2 -A 6 -E "error|Error" "$OUT/build.log"
  echo "SUMMARY: build failed"
  exit 1
fi
build_s=$((SECONDS - start))
echo "build: ${build_s} s"

export PYTHONPATH="$BUILD/python:python${PYTHONPATH:+:$PYTHONPATH}"
export SPLITKV_CLI="$BUILD/splitkv"
start=$SECONDS
timeout "${PYTEST_TIMEOUT:-200}" "$PYTHON" -m pytest -q -rfEs -p no:cacheprovider tests/python >"$OUT/pytest.log" 2>&1
test_rc=$?
test_s=$((SECONDS - start))
timeout "${BENCH_TIMEOUT:-60}" "$PYTHON" python/bench_overhead.py --out "$OUT/python-overhead.json" >"$OUT/bench.log" 2>&1
bench_rc=$?

tail -n 60 "$OUT/pytest.log"
echo "---- bench (rc $bench_rc)"
if [[ -f "$OUT/python-overhead.json" ]]; then cat "$OUT/python-overhead.json"; else tail -20 "$OUT/bench.log"; fi
summary=$(grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed|error).* =+$|passed|failed" "$OUT/pytest.log" | tail -1)
echo "SUMMARY: build ${build_s}s; pytest rc ${test_rc} in ${test_s}s: ${summary}; bench rc ${bench_rc}" \
  "eager_overhead_us=$(grep -o '"eager_overhead_us": [-0-9.]*' "$OUT/python-overhead.json" 2>/dev/null | cut -d' ' -f2)" \
  "graph_overhead_us=$(grep -o '"graph_overhead_us": [-0-9.]*' "$OUT/python-overhead.json" 2>/dev/null | cut -d' ' -f2)"
