// One way to launch every kernel: dynamic shared memory opted in, PDL attribute when asked.
#pragma once

#include <cuda_runtime.h>

#include "launch/launch_config.hpp"

namespace splitkv::detail {

template <class Params>
cudaError_t launch_kernel(void (*kernel)(Params), dim3 grid, dim3 block, int smem_bytes, const Params& params,
                          const LaunchConfig& config) {
  if (smem_bytes > 48 * 1024) {
    // Not a stream operation: legal during graph capture.
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
        e != cudaSuccess) {
      return e;
    }
  }
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t launch{};
  launch.gridDim = grid;
  launch.blockDim = block;
  launch.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  launch.stream = config.stream;
  launch.attrs = attribute;
  launch.numAttrs = config.use_pdl ? 1 : 0;
  return cudaLaunchKernelEx(&launch, kernel, params);
}

}  // namespace splitkv::detail
