// The rotation of a rotated KV cache (docs/KV_FORMATS.md, "Rotated caches"): an orthogonal map of
// the head dimension applied to K and V before they are quantized, so that a channel much larger than
// the rest (real models' keys carry a few) is spread over all channels instead of taking a
// per-token row's whole range. For a row x of D values (D a power of two):
//
//   rotate(x)   = (1 / sqrt(D)) * WHT(s .* x)      unrotate(y) = s .* ((1 / sqrt(D)) * WHT(y))
//
// WHT is the (unnormalized, Sylvester-ordered) Walsh-Hadamard transform and s a fixed sign per
// channel (kv_rotation_sign). The map is orthogonal, so q . k = rotate(q) . rotate(k): attention
// over a rotated cache takes the rotated query, and its output is rotated back once per row
// (O = unrotate(sum_t p_t rotate(v_t))). One definition for the host quantizer, the append kernel,
// the reference and the kernels: the butterflies run in a fixed order in fp32 and the scale is one
// multiply at the end, so host and device give the same bits.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.hpp"

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
