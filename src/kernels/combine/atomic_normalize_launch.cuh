// Launcher of the atomic merge's normalization at one (dtype, head dim); the registry's
// atomic_normalize family instantiates it (atomic_normalize.cu.in).
#pragma once

#include "kernels/combine/atomic_normalize_kernel.cuh"
#include "kernels/combine/atomic_normalize_params.hpp"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {

// The grid is the kernel's own: enough blocks for the combine's rows.
template <class Element, int kHeadDim>
cudaError_t launch_atomic_normalize(const AtomicNormalizeParams& p, LaunchConfig config) {
  constexpr int kRowsPerBlock = kAtomicNormalizeThreads / (kHeadDim / 4);
  config.grid[0] = static_cast<unsigned>((p.combine.rows + kRowsPerBlock - 1) / kRowsPerBlock);
  config.grid[1] = config.grid[2] = 1;
  return launch_kernel(atomic_normalize_kernel<Element, kHeadDim>, dim3(kAtomicNormalizeThreads), 0, p, config);
}

}  // namespace splitkv::detail
