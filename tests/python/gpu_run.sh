#!/usr/bin/env bash
# The Python package on a GPU machine (torch, nanobind, numpy and pytest installed; no network
# needed, CUTLASS in .deps/): builds the module and the CLI with CMake for sm_90a (bf16, D=128
# unless SPLITKV_HEAD_DIMS / SPLITKV_DTYPES / CMAKE_CUDA_ARCHITECTURES say otherwise), runs
# tests/python (the GPU tests included) and python/bench_overhead.py, and writes the logs and
# python-overhead.json to $OUT (default build-py/out). Prints a summary line last.
#   DEADLINE=285 tests/python/gpu_run.sh   # stop pytest so that everything ends within 285 s
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
timeout "${BENCH_TIMEOUT:-60}" "$PYTHON" -u python/bench_overhead.py --out "$OUT/python-overhead.json" \
  >"$OUT/bench.log" 2>&1
bench_rc=$?
# The GPU tests first; the rest of the time (DEADLINE seconds from the start, if set) for pytest.
start=$SECONDS
test_timeout=${PYTEST_TIMEOUT:-600}
if [[ -n "${DEADLINE:-}" ]]; then test_timeout=$((DEADLINE - SECONDS - 10)); fi
(( test_timeout >= 20 )) || test_timeout=20
files=(tests/python/test_torch_gpu.py)
for f in tests/python/test_*.py; do [[ $f == tests/python/test_torch_gpu.py ]] || files+=("$f"); done
timeout "$test_timeout" "$PYTHON" -u -m pytest -v -rfEs -p no:cacheprovider "${files[@]}" >"$OUT/pytest.log" 2>&1
test_rc=$?
test_s=$((SECONDS - start))

grep -E "FAILED|ERROR|SKIPPED" "$OUT/pytest.log" | head -40
tail -n 25 "$OUT/pytest.log"
echo "---- bench (rc $bench_rc)"
if [[ -f "$OUT/python-overhead.json" ]]; then cat "$OUT/python-overhead.json"; else tail -20 "$OUT/bench.log"; fi
summary=$(grep -E "^=+ .*(passed|failed|error).* =+$" "$OUT/pytest.log" | tail -1)
[[ -n $summary ]] || summary="interrupted after $(grep -cE " (PASSED|FAILED|ERROR|SKIPPED)" "$OUT/pytest.log") tests"
echo "SUMMARY: build ${build_s}s; pytest rc ${test_rc} in ${test_s}s: ${summary}; bench rc ${bench_rc}" \
  "eager_overhead_us=$(grep -o '"eager_overhead_us": [-0-9.]*' "$OUT/python-overhead.json" 2>/dev/null | cut -d' ' -f2)" \
  "graph_overhead_us=$(grep -o '"graph_overhead_us": [-0-9.]*' "$OUT/python-overhead.json" 2>/dev/null | cut -d' ' -f2)"
