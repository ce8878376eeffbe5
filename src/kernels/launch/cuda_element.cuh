// The CUDA type of a registry element type (cutlass::half_t, cutlass::bfloat16_t): what the cache
// and copy kernels, written on CUDA's __half / __nv_bfloat16, are instantiated with.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include <cutlass/numeric_types.h>

namespace splitkv::detail {

template <class Element>
using CudaElement = std::conditional_t<std::is_same_v<Element, cutlass::half_t>, __half, __nv_bfloat16>;

}  // namespace splitkv::detail
