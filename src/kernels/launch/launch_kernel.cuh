// One way to launch every kernel: dynamic shared memory opted in (kernel_attributes.hpp: raised,
// never lowered), PDL attribute when asked.
#pragma once

#include <cuda_runtime.h>

#include "kernels/launch/kernel_attributes.hpp"
#include "kernels/launch/launch_config.hpp"

namespace splitkv::detail {

// Launches `kernel` on config.grid.
template <class Params>
cudaError_t launch_kernel(void (*kernel)(Params), dim3 block, int kernel_smem_bytes, const Params& params,
                          const LaunchConfig& config) {
  const int smem_bytes = kernel_smem_bytes > config.min_smem_bytes ? kernel_smem_bytes : config.min_smem_bytes;
  if (cudaError_t e = ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes); e != cudaSuccess) {
    return e;
  }
  cudaLaunchAttribute attributes[2];
  unsigned num_attributes = 0;
  if (config.use_pdl) {
    attributes[num_attributes].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[num_attributes++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (config.cluster_blocks > 1) {
    if (config.cluster_blocks > 8) {  // beyond the portable cluster size
      if (cudaError_t e = ensure_non_portable_clusters(reinterpret_cast<const void*>(kernel)); e != cudaSuccess) {
        return e;
      }
    }
    attributes[num_attributes].id = cudaLaunchAttributeClusterDimension;
    attributes[num_attributes].val.clusterDim.x = static_cast<unsigned>(config.cluster_blocks);
    attributes[num_attributes].val.clusterDim.y = 1;
    attributes[num_attributes++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t launch{};
  launch.gridDim = config.persistent_blocks > 0 ? dim3(static_cast<unsigned>(config.persistent_blocks))
                                                : dim3(config.grid[0], config.grid[1], config.grid[2]);
  launch.blockDim = block;
  launch.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  launch.stream = config.stream;
  launch.attrs = attributes;
  launch.numAttrs = num_attributes;
  return cudaLaunchKernelEx(&launch, kernel, params);
}

// The two-pass strategy: the statistics kernel, then the output kernel on the same stream (the row
// statistics cross through the workspace in stream order).
template <class Params>
cudaError_t launch_two_pass(void (*stats_kernel)(Params), void (*output_kernel)(Params), dim3 block, int smem_bytes,
                            const Params& params, const LaunchConfig& config) {
  if (cudaError_t e = launch_kernel(stats_kernel, block, smem_bytes, params, config); e != cudaSuccess) return e;
  return launch_kernel(output_kernel, block, smem_bytes, params, config);
}

}  // namespace splitkv::detail
