// Launcher of the KV-cache dequantization kernel at one staging dtype (head dim and format are
// runtime arguments; the registry's dequant_kv family keys its instances by head dim too, so chunked
// prefill finds one as it finds any family's). Instantiated from dequant_kv.cu.in.
#pragma once

#include <algorithm>

#include "kernels/launch/cuda_element.cuh"
#include "kernels/launch/launch_kernel.cuh"
#include "kernels/quant/dequant_kv_kernel.cuh"
#include "kernels/quant/dequant_kv_params.hpp"

namespace splitkv::detail {

// At most this many blocks: about two waves of 256-thread blocks on the largest card. The blocks
// share the items (16-token chunks of the sequences' real lengths) evenly, so more would only add
// blocks that find nothing to do.
inline constexpr int64_t kDequantGridBlocks = 2048;

// The grid is the kernel's own: one dimension, no more blocks than the bounds allow items.
template <class Element>
cudaError_t launch_dequantize_kv(const DequantKvParams& params, const LaunchConfig& config) {
  using Out = CudaElement<Element>;
  LaunchConfig c = config;
  const int64_t chunks = (std::max(params.max_kv_len, 1) + kDequantTokensPerBlock - 1) / kDequantTokensPerBlock;
  c.grid[0] = static_cast<unsigned>(std::min<int64_t>(std::max(params.batch, 1) * chunks, kDequantGridBlocks));
  c.grid[1] = 1;
  c.grid[2] = 1;
  return launch_kernel(dequantize_kv_kernel<Out>, dim3(kDequantThreads), 0, params, c);
}

}  // namespace splitkv::detail
