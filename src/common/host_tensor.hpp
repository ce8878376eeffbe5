// Element access to host memory described by a TensorRef (reference, CPU backend, tests).
#pragma once

#include <cstdint>

#include "common/half_convert.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

inline int64_t element_offset(const TensorRef& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  return i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2] + i3 * t.stride[3];
}

// Reads a 16-bit float element as float.
inline float load_half(const TensorRef& t, int64_t offset) {
  return half_bits_to_float(static_cast<const uint16_t*>(t.data)[offset], t.dtype);
}

inline void store_half(const TensorRef& t, int64_t offset, float value) {
  static_cast<uint16_t*>(t.data)[offset] = float_to_half_bits(value, t.dtype);
}

inline int32_t load_i32(const TensorRef& t, int64_t offset) { return static_cast<const int32_t*>(t.data)[offset]; }

}  // namespace splitkv::detail
