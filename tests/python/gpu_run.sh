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
    -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=ON -DSPLITKV_STUDY_FAMILIES=ON -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
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
# One process, in a fixed order (-p no:randomly), so that state one test leaves (torch.compile,
# CUDA graphs, caches) reaches the next as in a serving process. A native crash is diagnosed:
# Python's faulthandler (-X faulthandler, stderr into pytest.log) prints every thread's Python
# stack; with gdb on the host pytest runs under it (SPLITKV_GDB=0 turns that off), which prints
# the native backtrace of the crashing thread, every thread's top frames and the loaded libraries
# before passing the signal on. Then the crashing test is rerun in fresh processes (bisect.log):
# alone, after the GPU test file, after the GPU file without its compile tests, and after the
# other files; and the tests after it run in a fresh process so the summary still counts them.
start=$SECONDS
test_timeout=${PYTEST_TIMEOUT:-600}
if [[ -n "${DEADLINE:-}" ]]; then test_timeout=$((DEADLINE - SECONDS - 10)); fi
(( test_timeout >= 20 )) || test_timeout=20
gpu_file=tests/python/test_torch_gpu.py
files=("$gpu_file")
for f in tests/python/test_*.py; do [[ $f == "$gpu_file" ]] || files+=("$f"); done
export PYTHONFAULTHANDLER=1
py_exe=$("$PYTHON" -c 'import sys; print(sys.executable)')
pytest_args=(-m pytest -v -rfEs -p no:cacheprovider -p no:randomly)
use_gdb=0
if [[ ${SPLITKV_GDB:-1} != 0 ]] && command -v gdb >/dev/null; then use_gdb=1; fi
cat >"$OUT/crash.gdb" <<'GDB'
set pagination off
set confirm off
set print thread-events off
handle all nostop noprint pass
handle SIGSEGV SIGBUS SIGFPE SIGILL SIGABRT stop print pass
run
if $_isvoid($_exitcode)
  echo \n==== gdb: native backtrace of the crashing thread ====\n
  bt 60
  echo \n==== gdb: threads ====\n
  info threads
  thread apply all bt 12
  echo \n==== gdb: shared libraries ====\n
  info sharedlibrary
  echo \n==== gdb: passing the signal on (faulthandler prints the Python stacks) ====\n
  eval "signal %d", $_siginfo.si_signo
  quit 128 + $_siginfo.si_signo
else
  quit $_exitcode
end
GDB
run_pytest() {  # run_pytest LOG TIMEOUT ARGS...: pytest in a fresh interpreter (under gdb if there), rc
  local log=$1 limit=$2
  shift 2
  if (( use_gdb )); then
    timeout --kill-after=20 "$limit" gdb -q -batch -x "$OUT/crash.gdb" --args \
      "$py_exe" -X faulthandler -u "${pytest_args[@]}" "$@" >"$log" 2>&1
  else
    timeout --kill-after=20 "$limit" "$py_exe" -X faulthandler -u "${pytest_args[@]}" "$@" >"$log" 2>&1
  fi
}
run_pytest "$OUT/pytest.log" "$test_timeout" "${files[@]}"
test_rc=$?
crash=""
if (( test_rc >= 128 && test_rc != 137 )) || grep -q "Fatal Python error" "$OUT/pytest.log"; then
  # -v prints a test's id before running it: the crashing test is the last id without a result.
  crash=$(grep -oE "^tests/python/[^ ]+::[^ ]+( |$)" "$OUT/pytest.log" | tail -1 | tr -d ' ')
  if [[ -n $crash ]] && grep -F "$crash " "$OUT/pytest.log" | grep -qE " (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)"; then
    crash=""  # it finished: the crash came after the last test (teardown, exit)
  fi
  echo "---- native crash (rc $test_rc) in ${crash:-an unknown place} (all stacks in pytest.log):"
  grep -m 1 -A 16 "==== gdb: native backtrace" "$OUT/pytest.log" | cut -c1-200
  grep -m 1 -A 8 "^Current thread" "$OUT/pytest.log" | cut -c1-200
fi
bisect=""
if [[ -n $crash ]]; then
  crash_file=${crash%%::*}
  crash_name=${crash##*::}
  crash_name=${crash_name%%[*}  # the function, without its parameters
  others=()
  for f in "${files[@]:1}"; do [[ $f == "$crash_file" ]] && break; others+=("$f"); done
  {
    for variant in alone after-gpu-file after-gpu-file-without-compile after-other-files; do
      left=$((test_timeout - (SECONDS - start)))
      (( left >= 30 )) || { echo "$variant: no time left"; continue; }
      case $variant in
        alone) args=("$crash") ;;
        after-gpu-file) args=("$gpu_file" "$crash") ;;
        after-gpu-file-without-compile) args=("$gpu_file" "$crash" -k "not compile or $crash_name") ;;
        after-other-files) args=("${others[@]}" "$crash") ;;
      esac
      run_pytest "$OUT/bisect-$variant.log" "$left" "${args[@]}"
      echo "$variant: rc $?"
    done
  } >"$OUT/bisect.log" 2>&1
  bisect=$(paste -sd ';' "$OUT/bisect.log")
  echo "---- bisect of $crash (rc >= 128: crashed again): $bisect"
  # The tests after the crashing one, in a fresh process, so that the summary counts them.
  rest=()
  seen=0
  for f in "${files[@]}"; do
    [[ $f == "$crash_file" ]] && seen=1
    (( seen )) && rest+=("$f")
  done
  left=$((test_timeout - (SECONDS - start)))
  if (( left >= 30 )); then
    run_pytest "$OUT/pytest-rest.log" "$left" "${rest[@]}" --deselect "$crash"
    echo "---- tests from $crash_file on, without $crash, in a fresh process: rc $?"
    tail -n 5 "$OUT/pytest-rest.log"
  fi
fi
test_s=$((SECONDS - start))

grep -E "FAILED|ERROR|SKIPPED" "$OUT/pytest.log" | head -40
tail -n 25 "$OUT/pytest.log"
echo "---- bench (rc $bench_rc)"
if [[ -f "$OUT/python-overhead.json" ]]; then cat "$OUT/python-overhead.json"; else tail -20 "$OUT/bench.log"; fi
summary=$(grep -E "^=+ .*(passed|failed|error).* =+$" "$OUT/pytest.log" | tail -1)
[[ -n $summary ]] || summary="interrupted after $(grep -cE " (PASSED|FAILED|ERROR|SKIPPED)" "$OUT/pytest.log") tests"
if [[ -n $crash ]]; then
  rest_summary=$(grep -E "^=+ .*(passed|failed|error).* =+$" "$OUT/pytest-rest.log" 2>/dev/null | tail -1)
  summary="$summary; CRASHED in $crash (bisect: $bisect); rest: ${rest_summary:-not run}"
fi
echo "SUMMARY: build ${build_s}s; pytest rc ${test_rc} in ${test_s}s: ${summary}; bench rc ${bench_rc}" \
  "eager_overhead_us=$(grep -o '"eager_overhead_us": [-0-9.]*' "$OUT/python-overhead.json" 2>/dev/null | cut -d' ' -f2)" \
  "graph_overhead_us=$(grep -o '"graph_overhead_us": [-0-9.]*' "$OUT/python-overhead.json" 2>/dev/null | cut -d' ' -f2)"
