// Deterministic random data for tests and benchmarks.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/half_convert.hpp"

namespace splitkv::testing {

// Standard normal values times `scale`, rounded to dtype, as element bits.
inline void fill_normal(std::vector<uint16_t>& bits, DType dtype, std::mt19937_64& rng, float scale = 1.f) {
  std::normal_distribution<float> normal(0.f, 1.f);
  for (uint16_t& x : bits) x = detail::float_to_half_bits(normal(rng) * scale, dtype);
}

inline uint16_t nan_bits(DType dtype) { return dtype == DType::kBF16 ? 0x7fc0 : 0x7e00; }

}  // namespace splitkv::testing
