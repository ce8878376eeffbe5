#!/usr/bin/env bash
# Installs what the build needs (CUTLASS headers from pip; GoogleTest, CMake and a generator from
# the system when missing), then configures and builds splitkv into $SPLITKV_BUILD_DIR (./build).
#   SPLITKV_HEAD_DIMS="64;128;256"  SPLITKV_DTYPES="fp16;bf16"  kernel instantiations to compile
#   CMAKE_CUDA_ARCHITECTURES=90a      target GPUs (80 builds too)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SPLITKV_BUILD_DIR:-build}
PYTHON=${PYTHON:-python3}

if ! "$PYTHON" -c "import cutlass_library" 2>/dev/null && [[ ! -f .deps/cutlass/include/cute/tensor.hpp ]]; then
  echo "splitkv setup: installing CUTLASS headers (pip install -r requirements.txt)"
  "$PYTHON" -m pip install --quiet -r requirements.txt
fi
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
[[ -f /usr/include/gtest/gtest.h ]] || need_apt+=(libgtest-dev)
if (( ${#need_apt[@]} )); then
  echo "splitkv setup: installing ${need_apt[*]}"
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

cmake -S . -B "$BUILD" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90a}" \
  -DSPLITKV_HEAD_DIMS="${SPLITKV_HEAD_DIMS:-64;128;256}" \
  -DSPLITKV_DTYPES="${SPLITKV_DTYPES:-fp16;bf16}"
cmake --build "$BUILD" --parallel "${SPLITKV_JOBS:-$(nproc)}"
