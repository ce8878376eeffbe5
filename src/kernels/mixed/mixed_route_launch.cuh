// Launcher of the mixed route's kernels at one element type (head dim at run time); instantiated
// from mixed_route.cu.in for the registry's mixed_route family.
#pragma once

#include "kernels/launch/cuda_element.cuh"
#include "kernels/launch/launch_kernel.cuh"
#include "kernels/mixed/mixed_route_kernel.cuh"
#include "kernels/mixed/mixed_route_params.hpp"

namespace splitkv::detail {

// The grid: one block per sequence.
template <class Element>
cudaError_t launch_mixed_route(const MixedRouteParams& params, const LaunchConfig& config) {
  using T = CudaElement<Element>;
  LaunchConfig c = config;
  c.grid[0] = static_cast<unsigned>(params.batch);
  c.grid[1] = c.grid[2] = 1;
  if (params.stage == MixedRouteStage::kSplit) {
    return launch_kernel(mixed_split_kernel<T>, dim3(kMixedRouteThreads), 0, params, c);
  }
  return launch_kernel(mixed_merge_kernel<T>, dim3(kMixedRouteThreads), 0, params, c);
}

}  // namespace splitkv::detail
