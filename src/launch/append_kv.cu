// Launcher of the append kernel: one instance per (new-row dtype, head dim), six in all, compiled
// for every configured architecture whatever SPLITKV_HEAD_DIMS / SPLITKV_DTYPES select (the kernel
// is small, and a cache must be writable at every head dim decode can be built for).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/quant/append_kv_kernel.cuh"
#include "launch/aux_launchers.hpp"
#include "launch/launch_kernel.cuh"

namespace splitkv::detail {
namespace {

template <class In>
cudaError_t launch_for_dtype(const AppendKvParams& p, const LaunchConfig& config) {
  const dim3 block(kAppendWarpsPerBlock * 32);
  switch (p.head_dim) {
    case 64: return launch_kernel(append_kv_kernel<In, 64>, block, 0, p, config);
    case 128: return launch_kernel(append_kv_kernel<In, 128>, block, 0, p, config);
    case 256: return launch_kernel(append_kv_kernel<In, 256>, block, 0, p, config);
  }
  return cudaErrorInvalidValue;  // validation admits no other head dim
}

}  // namespace

cudaError_t launch_append_kv(const AppendKvParams& params, const LaunchConfig& config) {
  return params.dtype == DType::kF16 ? launch_for_dtype<__half>(params, config)
                                     : launch_for_dtype<__nv_bfloat16>(params, config);
}

}  // namespace splitkv::detail
