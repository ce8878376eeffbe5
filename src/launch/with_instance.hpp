// Runtime (dtype, head dim) -> compile-time (Element, kHeadDim) for the combinations this build
// holds. The SPLITKV_HAS_* switches come from the generated build configuration, so a reduced
// build (CI) references only what it compiled.
#pragma once

#include <type_traits>

#include <cuda_runtime_api.h>
#include <cutlass/numeric_types.h>

#include "splitkv/types.hpp"
#include "splitkv_build_config.hpp"

namespace splitkv::detail {

template <int kHeadDim>
using HeadDim = std::integral_constant<int, kHeadDim>;

// Calls fn(Element{}, HeadDim<D>{}) when the combination is compiled (and D <= kMaxHeadDim);
// otherwise returns cudaErrorInvalidValue.
template <int kMaxHeadDim = 256, class Fn>
cudaError_t with_instance(DType dtype, int head_dim, Fn&& fn) {
  [[maybe_unused]] const bool fp16 = dtype == DType::kF16, bf16 = dtype == DType::kBF16;
#if SPLITKV_HAS_FP16 && SPLITKV_HAS_HD64
  if (fp16 && head_dim == 64) return fn(cutlass::half_t{}, HeadDim<64>{});
#endif
#if SPLITKV_HAS_FP16 && SPLITKV_HAS_HD128
  if (fp16 && head_dim == 128) return fn(cutlass::half_t{}, HeadDim<128>{});
#endif
#if SPLITKV_HAS_BF16 && SPLITKV_HAS_HD64
  if (bf16 && head_dim == 64) return fn(cutlass::bfloat16_t{}, HeadDim<64>{});
#endif
#if SPLITKV_HAS_BF16 && SPLITKV_HAS_HD128
  if (bf16 && head_dim == 128) return fn(cutlass::bfloat16_t{}, HeadDim<128>{});
#endif
  if constexpr (kMaxHeadDim >= 256) {
#if SPLITKV_HAS_FP16 && SPLITKV_HAS_HD256
    if (fp16 && head_dim == 256) return fn(cutlass::half_t{}, HeadDim<256>{});
#endif
#if SPLITKV_HAS_BF16 && SPLITKV_HAS_HD256
    if (bf16 && head_dim == 256) return fn(cutlass::bfloat16_t{}, HeadDim<256>{});
#endif
  }
  return cudaErrorInvalidValue;
}

}  // namespace splitkv::detail
