// Host conversions between float and the 16-bit element types (round to nearest even), so host
// code (reference, CPU backend, tests) needs no CUDA headers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "splitkv/types.hpp"

namespace splitkv::detail {

inline float bf16_to_float(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t(h) & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    const float sub = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
    return sign ? -sub : sub;
  }
  if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: subnormal (exact scaling, then round to nearest even)
    float af;
    std::memcpy(&af, &ax, sizeof af);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(af * 16777216.0f)));
  }
  uint32_t h = ((((ax >> 23) - 112u)) << 10) | ((ax & 0x7fffffu) >> 13);
  const uint32_t rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float half_bits_to_float(uint16_t bits, DType dtype) {
  return dtype == DType::kBF16 ? bf16_to_float(bits) : fp16_to_float(bits);
}

inline uint16_t float_to_half_bits(float f, DType dtype) {
  return dtype == DType::kBF16 ? float_to_bf16(f) : float_to_fp16(f);
}

// Rounds f to the nearest value representable in dtype.
inline float round_to(float f, DType dtype) { return half_bits_to_float(float_to_half_bits(f, dtype), dtype); }

}  // namespace splitkv::detail
