// Launcher of the KV-cache dequantization kernel: one instance per staging type (fp16, bf16),
// compiled for every configured architecture (head dim and format are runtime arguments).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/quant/dequant_kv_kernel.cuh"
#include "kernels/quant/dequant_kv_params.hpp"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {

cudaError_t launch_dequantize_kv(const DequantKvParams& params, const LaunchConfig& config) {
  LaunchConfig c = config;
  const int64_t chunks = (std::max(params.max_kv_len, 1) + kDequantTokensPerBlock - 1) / kDequantTokensPerBlock;
  c.grid[0] = static_cast<unsigned>(params.batch);
  c.grid[1] = static_cast<unsigned>(std::min<int64_t>(chunks, 65535));  // blocks stride over longer caches
  c.grid[2] = 1;
  const dim3 block(kDequantThreads);
  return params.dtype == DType::kF16 ? launch_kernel(dequantize_kv_kernel<__half>, block, 0, params, c)
                                     : launch_kernel(dequantize_kv_kernel<__nv_bfloat16>, block, 0, params, c);
}

}  // namespace splitkv::detail
