// 2^x on the FMA and integer pipes, without the SFU (MUFU): a softmax whose exponentials share the
// SFU with other per-score work (a softcap's tanh) computes part of them here instead
// (OnlineSoftmax::fold's kPolyEvery). Host and device: the CPU tests check its error.
//
// x = j + f, j = round(x) by the float magic-add (1.5 * 2^23: the sum's low mantissa bits hold j),
// f = x - j in [-0.5, 0.5]; 2^f by a degree-3 polynomial (Horner: three FMAs; coefficients fitted
// for the least maximum relative error on [-0.5, 0.5]: 7.5e-5, below half a bf16 ulp); 2^j built
// in the exponent bits of a scale the polynomial is multiplied by, so a NaN argument stays NaN.
// As ex2.approx.ftz: results below 2^-126 (x < -126, and x = -inf) are 0.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.hpp"

namespace splitkv::detail {

SPLITKV_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

SPLITKV_HD float float_of_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// Arguments up to 127 (softmax arguments are <= 0, up to rounding).
SPLITKV_HD float exp2_poly(float x) {
  constexpr float kRoundMagic = 12582912.f;  // 1.5 * 2^23
  const float t = x + kRoundMagic;           // round(x) in the low mantissa bits
  const float f = x - (t - kRoundMagic);     // in [-0.5, 0.5]
  float p = 0.05517149344086647f;
  p = p * f + 0.24261093139648438f;
  p = p * f + 0.6932609677314758f;
  p = p * f + 0.9999280571937561f;
  // (bits(t) << 23) is j << 23 (the magic's own bits shift out); + 127 << 23: the bits of 2^j.
  const float scale = float_of_bits((float_bits(t) << 23) + (127u << 23));
  return x < -126.f ? 0.f : p * scale;
}

}  // namespace splitkv::detail
