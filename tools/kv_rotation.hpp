// The rotation the accuracy study (tools/quant_accuracy.cpp) applies to K and V rows before
// quantizing them: an orthogonal map of the head dimension that spreads a channel much larger than
// the rest over all channels. For a row x of D values (D a power of two):
//
//   rotate(x)   = (1 / sqrt(D)) * WHT(s .* x)      unrotate(y) = s .* ((1 / sqrt(D)) * WHT(y))
//
// WHT is the unnormalized, Sylvester-ordered Walsh-Hadamard transform and s a fixed sign per
// channel. Because the map is orthogonal, attention over a rotated cache equals attention with the
// query rotated and the output rotated back, so the study measures it as attention over the rows
// rotated back. Measured and not chosen for the cache formats (docs/KV_FORMATS.md, "Outlier
// channels"); written in host-and-device form in case a later design brings it back.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace splitkv::detail {

// +1 or -1 for channel c < 256: bit c of a fixed 256-bit string (SHA-256's initial hash words, the
// fractional parts of the square roots of the first eight primes: random-looking and unstructured,
// so that no Walsh function lines up with it and a constant offset in every channel is spread too).
SPLITKV_HD float kv_rotation_sign(int c) {
  constexpr uint32_t kBits[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  return ((kBits[(c >> 5) & 7] >> (c & 31)) & 1u) != 0u ? -1.f : 1.f;
}

// 1 / sqrt(d) rounded to fp32, for the head dims splitkv serves (0 for others).
SPLITKV_HD float kv_rotation_scale(int d) {
  return d == 64 ? 0.125f : d == 128 ? 0.0883883461356163f : d == 256 ? 0.0625f : 0.f;
}

// In-place unnormalized Walsh-Hadamard transform of x[0..d), stages of span 1, 2, 4, ... d/2.
SPLITKV_HD void walsh_hadamard(float* x, int d) {
  for (int h = 1; h < d; h *= 2) {
    for (int i = 0; i < d; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

SPLITKV_HD void kv_rotate(float* x, int d) {
  for (int c = 0; c < d; ++c) x[c] *= kv_rotation_sign(c);
  walsh_hadamard(x, d);
  const float scale = kv_rotation_scale(d);
  for (int c = 0; c < d; ++c) x[c] *= scale;
}

SPLITKV_HD void kv_unrotate(float* x, int d) {
  walsh_hadamard(x, d);
  const float scale = kv_rotation_scale(d);
  for (int c = 0; c < d; ++c) x[c] = x[c] * scale * kv_rotation_sign(c);
}

}  // namespace splitkv::detail
