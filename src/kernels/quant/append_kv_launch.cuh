// Launcher of the append kernels at one (dtype of the new rows, head dim): the row kernel, and for
// *_kc caches the group kernel before it. The registry's append_kv family instantiates it
// (append_kv.cu.in); run_append_kv finds it by name.
#pragma once

#include "kernels/launch/cuda_element.cuh"
#include "kernels/launch/launch_kernel.cuh"
#include "kernels/quant/append_kc_groups_kernel.cuh"
#include "kernels/quant/append_kv_kernel.cuh"
#include "kernels/quant/append_kv_params.hpp"

namespace splitkv::detail {

// config.grid[0]: the row kernel's blocks (kAppendWarpsPerBlock rows each).
template <class Element, int kHeadDim>
cudaError_t launch_append_kv(const AppendKvParams& p, const LaunchConfig& config) {
  using In = CudaElement<Element>;
  if (p.kc.enabled) {  // phase 1 (complete groups) before phase 2 (the ring), in stream order
    LaunchConfig groups = config;
    groups.grid[0] = static_cast<unsigned>(p.num_tokens * p.num_kv_heads);
    const dim3 block(kAppendKcThreads);
    const cudaError_t e = p.k.format == CodeKind::kInt8 ? launch_kernel(append_kc_groups_kernel<In, kHeadDim, 8>, block, 0, p, groups)
                                         : launch_kernel(append_kc_groups_kernel<In, kHeadDim, 4>, block, 0, p, groups);
    if (e != cudaSuccess) return e;
  }
  return launch_kernel(append_kv_kernel<In, kHeadDim>, dim3(kAppendWarpsPerBlock * 32), 0, p, config);
}

}  // namespace splitkv::detail
