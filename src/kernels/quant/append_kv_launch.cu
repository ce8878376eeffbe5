// Launchers of the append kernels: the row kernel, one instance per (new-row dtype, head dim), six
// in all; and for *_kc caches the group kernel before it, one instance per (dtype, head dim, key
// bits), twelve. Compiled for every configured architecture whatever SPLITKV_HEAD_DIMS /
// SPLITKV_DTYPES select (the kernels are small, and a cache must be writable at every head dim
// decode can be built for).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/quant/append_kc_groups_kernel.cuh"
#include "kernels/quant/append_kv_kernel.cuh"
#include "kernels/quant/append_kv_params.hpp"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {
namespace {

template <class In, int kHeadDim>
cudaError_t launch_for_head_dim(const AppendKvParams& p, const LaunchConfig& config) {
  if (p.kc.enabled) {  // phase 1 (complete groups) before phase 2 (the ring), in stream order
    LaunchConfig groups = config;
    groups.grid[0] = static_cast<unsigned>(p.num_tokens * p.num_kv_heads);
    const dim3 block(kAppendKcThreads);
    const cudaError_t e = p.kc.bits == 8 ? launch_kernel(append_kc_groups_kernel<In, kHeadDim, 8>, block, 0, p, groups)
                                         : launch_kernel(append_kc_groups_kernel<In, kHeadDim, 4>, block, 0, p, groups);
    if (e != cudaSuccess) return e;
  }
  return launch_kernel(append_kv_kernel<In, kHeadDim>, dim3(kAppendWarpsPerBlock * 32), 0, p, config);
}

template <class In>
cudaError_t launch_for_dtype(const AppendKvParams& p, const LaunchConfig& config) {
  switch (p.head_dim) {
    case 64: return launch_for_head_dim<In, 64>(p, config);
    case 128: return launch_for_head_dim<In, 128>(p, config);
    case 256: return launch_for_head_dim<In, 256>(p, config);
  }
  return cudaErrorInvalidValue;  // validation admits no other head dim
}

}  // namespace

cudaError_t launch_append_kv(const AppendKvParams& params, const LaunchConfig& config) {
  return params.dtype == DType::kF16 ? launch_for_dtype<__half>(params, config)
                                     : launch_for_dtype<__nv_bfloat16>(params, config);
}

}  // namespace splitkv::detail
