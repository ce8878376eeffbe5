// Launcher of one decode instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/decode/decode_kernel.cuh"
#include "launch/launch_kernel.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim>
cudaError_t launch_decode_instance(const DecodeParams& params, const LaunchConfig& config) {
  using Traits = DecodeTraits<Element, kHeadDim>;
  const dim3 grid(params.num_splits, params.num_kv_heads * params.m_tiles, params.batch);
  return launch_kernel(decode_kernel<Traits>, grid, dim3(Traits::kThreads), Traits::kSmemBytes, params, config);
}

}  // namespace splitkv::detail
