// Parameters of the atomic combine's normalization kernel (plain host/device struct, no CUDA
// types; launched through the registry's atomic_normalize family; atomic_normalize_kernel.cuh says
// what it does).
#pragma once

#include "kernels/combine/combine_params.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

struct AtomicNormalizeParams {
  CombineParams combine;  // the fallback partials and the final output (kFinal)
  float* atomic_o;        // [rows, D], re-zeroed here
  float* atomic_sum;      // [rows], re-zeroed here
  float reference_lse;
};

inline constexpr int kAtomicNormalizeThreads = 128;

}  // namespace splitkv::detail
