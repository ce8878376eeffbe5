// Launcher of the mixed step's work-list builder at one element type (the kernel ignores it);
// instantiated from mixed_work.cu.in for the registry's mixed_work family.
#pragma once

#include "kernels/launch/cuda_element.cuh"
#include "kernels/launch/launch_kernel.cuh"
#include "kernels/mixed/mixed_work_kernel.cuh"
#include "kernels/mixed/mixed_work_params.hpp"

namespace splitkv::detail {

// The grid: one block.
template <class Element>
cudaError_t launch_mixed_work(const MixedWorkParams& params, const LaunchConfig& config) {
  LaunchConfig c = config;
  c.grid[0] = c.grid[1] = c.grid[2] = 1;
  c.persistent_blocks = 0;
  c.cluster_blocks = 1;
  return launch_kernel(mixed_work_kernel<CudaElement<Element>>, dim3(kMixedWorkThreads), 0, params, c);
}

}  // namespace splitkv::detail
