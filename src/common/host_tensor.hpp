// Element access to host memory described by a TensorRef (reference, CPU backend, tests).
#pragma once

#include <cstdint>
#include <limits>

#include "common/half_convert.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

inline int64_t element_offset(const TensorRef& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  return i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2] + i3 * t.stride[3];
}

// Reads a floating-point element (fp16, bf16 or fp32) as float; NaN for other element types.
inline float load_float(const TensorRef& t, int64_t offset) {
  switch (t.dtype) {
    case DType::kF16:
    case DType::kBF16: return half_bits_to_float(static_cast<const uint16_t*>(t.data)[offset], t.dtype);
    case DType::kF32: return static_cast<const float*>(t.data)[offset];
    default: return std::numeric_limits<float>::quiet_NaN();
  }
}

// Writes a floating-point element (fp16, bf16 or fp32), rounding to nearest even.
inline void store_float(const TensorRef& t, int64_t offset, float value) {
  if (t.dtype == DType::kF32) {
    static_cast<float*>(t.data)[offset] = value;
  } else {
    static_cast<uint16_t*>(t.data)[offset] = float_to_half_bits(value, t.dtype);
  }
}

inline int32_t load_i32(const TensorRef& t, int64_t offset) { return static_cast<const int32_t*>(t.data)[offset]; }

}  // namespace splitkv::detail
