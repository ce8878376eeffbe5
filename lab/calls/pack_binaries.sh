#!/usr/bin/env bash
# Builds on the CPU machine what a device call can run without building there, xz'd under
# ignored folders that `carry` takes (64 MiB a call in all):
#   build-bin/: the CLI and the GPU tests of the working tree (sm_80 + sm_90a, bf16, D=128, every
#               format: the CI configuration, build-ci/);
#   build-ab/:  with OLD=<commit>, the prefill A/B pair: OLD and HEAD as CLIs only (sm_90a, D
#               64/128/256, fp16/bf16, native/int8/int4), each in its own worktree under /tmp;
#               with OLD_CI=<commit>, that commit's CLI in the CI configuration (splitkv_base_ci,
#               to run the decode and quant suites beside build-bin's).
# Run from the repository root after scripts/device_deps.sh. ~10 min for build-bin from a warm
# build-ci, ~25 min per A/B CLI on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
pack() { strip -o "/tmp/pack.$$" "$1" && xz -T2 -6 -c "/tmp/pack.$$" > "$2" && rm -f "/tmp/pack.$$"; }
if [ ! -f build-ci/build.ninja ]; then
  cmake -S . -B build-ci -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=80;90a" \
    -DSPLITKV_HEAD_DIMS=128 -DSPLITKV_DTYPES=bf16 -DSPLITKV_BUILD_PYTHON=OFF
fi
ninja -C build-ci splitkv_cli splitkv_gpu_tests
mkdir -p build-bin
pack build-ci/splitkv build-bin/splitkv.xz
pack build-ci/tests/splitkv_gpu_tests build-bin/splitkv_gpu_tests.xz
if [ -n "${OLD:-}" ]; then
  mkdir -p build-ab
  for side in base:"$OLD" new:HEAD; do
    name=${side%%:*} rev=${side#*:} dir=/tmp/ab-$name
    [ -d "$dir" ] || git worktree add --detach "$dir" "$rev"
    git -C "$dir" checkout -q --detach "$(git rev-parse "$rev")"
    ln -sfn "$PWD/.deps" "$dir/.deps"
    cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=OFF "-DSPLITKV_HEAD_DIMS=64;128;256" \
      "-DSPLITKV_DTYPES=fp16;bf16" "-DSPLITKV_KV_FORMATS=native;int8;int4" >/dev/null
    ninja -C "$dir/build" splitkv_cli
    pack "$dir/build/splitkv" "build-ab/splitkv_$name.xz"
  done
fi
if [ -n "${OLD_CI:-}" ]; then  # OLD_CI's CLI in the CI configuration, beside build-bin's (quant, decode suites)
  mkdir -p build-ab
  dir=/tmp/ab-base-ci
  [ -d "$dir" ] || git worktree add --detach "$dir" "$OLD_CI"
  git -C "$dir" checkout -q --detach "$(git rev-parse "$OLD_CI")"
  ln -sfn "$PWD/.deps" "$dir/.deps"
  cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=80;90a" \
    -DSPLITKV_HEAD_DIMS=128 -DSPLITKV_DTYPES=bf16 -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_PYTHON=OFF >/dev/null
  ninja -C "$dir/build" splitkv_cli
  pack "$dir/build/splitkv" build-ab/splitkv_base_ci.xz
fi
du -sh build-bin build-ab 2>/dev/null || true
