#!/usr/bin/env bash
# Builds (scripts/setup.sh) and runs every test through CTest. CPU tests always run; GPU tests
# skip with a message when there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

# The house rules (includes down the layers, no device code in host files, no lab citations).
"${PYTHON:-python3}" scripts/check_layout.py

# ---- Python package (python/, tests/python): the nanobind module is built in the same CMake
# build (SPLITKV_BUILD_PYTHON=ON, read by CMakeLists.txt at the first configure) and pytest runs
# against it; torch and GPU tests skip without torch or CUDA. SPLITKV_BUILD_PYTHON=OFF skips it.
PYTHON=${PYTHON:-python3}
BUILD=${SPLITKV_BUILD_DIR:-build}
if [[ "${SPLITKV_BUILD_PYTHON:-ON}" != OFF ]]; then
  if ! "$PYTHON" -c "import nanobind, numpy, pytest" 2>/dev/null; then
    echo "splitkv test: installing nanobind, numpy, pytest (pip)"
    "$PYTHON" -m pip install --quiet nanobind numpy pytest || true
  fi
  if "$PYTHON" -c "import nanobind, numpy, pytest" 2>/dev/null; then
    export SPLITKV_BUILD_PYTHON=ON SPLITKV_PYTHON="$(command -v "$PYTHON")"
  else
    echo "splitkv test: nanobind/numpy/pytest unavailable: Python tests skipped"
    export SPLITKV_BUILD_PYTHON=OFF
  fi
fi
# ---- end Python package

scripts/setup.sh
ctest --test-dir "$BUILD" --output-on-failure

# The planner's resident blocks per SM against the compiled decode kernels' registers
# (scripts/check_residency.py; cuobjdump from the toolkit, or pip's into .deps/cuobjdump).
CUOBJDUMP=$(command -v cuobjdump || true)
if [[ -z $CUOBJDUMP ]]; then
  CUOBJDUMP=$(ls .deps/cuobjdump/nvidia/*/bin/cuobjdump 2>/dev/null | head -1 || true)
fi
if [[ -z $CUOBJDUMP ]]; then
  echo "splitkv test: installing cuobjdump (pip nvidia-cuda-cuobjdump into .deps/cuobjdump)"
  "$PYTHON" -m pip install --quiet --target .deps/cuobjdump "nvidia-cuda-cuobjdump==13.*" || true
  CUOBJDUMP=$(ls .deps/cuobjdump/nvidia/*/bin/cuobjdump 2>/dev/null | head -1 || true)
fi
if [[ -n $CUOBJDUMP ]]; then
  "$PYTHON" scripts/check_residency.py "$BUILD/splitkv" --cuobjdump "$CUOBJDUMP"
else
  echo "splitkv test: no cuobjdump: the resident-block check skipped"
fi

# ---- Python package
if [[ $SPLITKV_BUILD_PYTHON == ON ]]; then
  if ! compgen -G "$BUILD/python/splitkv/_splitkv*" >/dev/null; then
    # A build directory configured before with the module off.
    cmake "$BUILD" -DSPLITKV_BUILD_PYTHON=ON -DPython_EXECUTABLE="$SPLITKV_PYTHON"
    cmake --build "$BUILD" --parallel "${SPLITKV_JOBS:-$(nproc)}"
  fi
  PYTHONPATH="$BUILD/python:python${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q -p no:cacheprovider tests/python
fi
# ---- end Python package
