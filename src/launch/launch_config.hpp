// How kernels are launched (no CuTe, no CUTLASS: safe to include from host-only code paths).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/combine/combine_params.hpp"
#include "kernels/decode/decode_params.hpp"
#include "kernels/prefill/prefill_params.hpp"
#include "kernels/tile_table.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

struct LaunchConfig {
  cudaStream_t stream = nullptr;
  bool use_pdl = false;    // programmatic dependent launch (sm_90+)
  int cluster_blocks = 1;  // > 1: launch clusters of this many blocks along x (sm_90+)
};

// Type-erased entry points: (dtype, head dim) -> the compiled instantiation. They return
// cudaErrorInvalidValue for combinations this build does not hold (validation rejects those first).
cudaError_t launch_decode(DType dtype, int head_dim, const DecodeParams& params, const LaunchConfig& config);
cudaError_t launch_combine(DType dtype, int head_dim, const CombineParams& params, const LaunchConfig& config);
cudaError_t launch_prefill(DType dtype, int head_dim, tiles::PrefillKernel kernel, const PrefillParams& params,
                           const LaunchConfig& config);

}  // namespace splitkv::detail
