// Parameters of the atomic combine's normalization kernel (plain host/device struct, no CUDA
// types; its launcher is declared at the end, and kernels/combine/atomic_normalize_kernel.cuh
// says what it does).
#pragma once

#include "kernels/combine/combine_params.hpp"
#include "kernels/launch/launch_config.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

struct AtomicNormalizeParams {
  CombineParams combine;  // the fallback partials and the final output (kFinal)
  float* atomic_o;        // [rows, D], re-zeroed here
  float* atomic_sum;      // [rows], re-zeroed here
  float reference_lse;
};

inline constexpr int kAtomicNormalizeThreads = 128;

// One instance per (dtype, head dim) (atomic_normalize_launch.cu). Host code (the atomic merge) calls it.
cudaError_t launch_atomic_normalize(const AtomicNormalizeParams& params, DType dtype, int head_dim,
                                    const LaunchConfig& config);

}  // namespace splitkv::detail
