// Launcher of the KV-cache dequantization kernel at one staging dtype (head dim and format are
// runtime arguments; the registry's dequant_kv family keys its instances by head dim too, so chunked
// prefill finds one as it finds any family's). Instantiated from dequant_kv.cu.in.
#pragma once

#include <algorithm>
#include <atomic>

#include "kernels/launch/cuda_element.cuh"
#include "kernels/launch/launch_kernel.cuh"
#include "kernels/quant/dequant_kv_kernel.cuh"
#include "kernels/quant/dequant_kv_params.hpp"

namespace splitkv::detail {

// At most this many blocks where the card cannot be asked (about two waves of 256-thread blocks
// on the largest card).
inline constexpr int64_t kDequantGridBlocks = 2048;

// One resident wave of the copy's blocks on the current device: the blocks share the items
// (16-token chunks of the sequences' real lengths) evenly, so a larger grid only adds blocks that
// find nothing to do, and with no item at all (a mixed step without a prefill chunk) every block
// past the first wave would be a wave of empty blocks. Asked once per device.
template <class Kernel>
int64_t dequant_wave_blocks(Kernel kernel) {
  constexpr int kDevices = 64;
  static std::atomic<int> wave[kDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return kDequantGridBlocks;
  int blocks = wave[device].load(std::memory_order_relaxed);
  if (blocks > 0) return blocks;
  int per_sm = 0, sms = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kDequantThreads, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || per_sm <= 0 || sms <= 0) {
    return kDequantGridBlocks;
  }
  blocks = per_sm * sms;
  wave[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

// The grid is the kernel's own: one dimension, one resident wave at most, no more blocks than the
// bounds allow items.
template <class Element>
cudaError_t launch_dequantize_kv(const DequantKvParams& params, const LaunchConfig& config) {
  using Out = CudaElement<Element>;
  LaunchConfig c = config;
  const int64_t chunks = (std::max(params.max_kv_len, 1) + kDequantTokensPerBlock - 1) / kDequantTokensPerBlock;
  const int64_t wave = dequant_wave_blocks(dequantize_kv_kernel<Out>);
  c.grid[0] = static_cast<unsigned>(std::min<int64_t>(std::max(params.batch, 1) * chunks, wave));
  c.grid[1] = 1;
  c.grid[2] = 1;
  return launch_kernel(dequantize_kv_kernel<Out>, dim3(kDequantThreads), 0, params, c);
}

}  // namespace splitkv::detail
