// Deterministic random data for tests and benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/half_convert.hpp"
#include "common/parallel_for.hpp"

namespace splitkv::testing {

// The generator of chunk `chunk` of a fill whose seed is `seed` (its own stream per chunk).
inline std::mt19937_64 chunk_generator(uint64_t seed, int64_t chunk) {
  return std::mt19937_64(seed + 0x9E3779B97F4A7C15ull * uint64_t(chunk + 1));
}

// set(i, x) for i in [0, n) with x standard normal times `scale`, in chunks of 64K elements on all
// hardware threads. The values depend only on one draw of `rng`, never on the thread count.
template <class Set>
void fill_normal_chunks(int64_t n, std::mt19937_64& rng, float scale, Set&& set) {
  constexpr int64_t kChunk = int64_t(1) << 16;
  const uint64_t seed = rng();
  detail::parallel_for((n + kChunk - 1) / kChunk, [&](int64_t chunk) {
    std::mt19937_64 generator = chunk_generator(seed, chunk);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (int64_t i = chunk * kChunk; i < std::min(n, (chunk + 1) * kChunk); ++i) set(i, normal(generator) * scale);
  });
}

// Standard normal values times `scale`, rounded to dtype, as element bits.
inline void fill_normal(std::vector<uint16_t>& bits, DType dtype, std::mt19937_64& rng, float scale = 1.f) {
  fill_normal_chunks(int64_t(bits.size()), rng, scale,
                     [&](int64_t i, float x) { bits[size_t(i)] = detail::float_to_half_bits(x, dtype); });
}

inline uint16_t nan_bits(DType dtype) { return dtype == DType::kBF16 ? 0x7fc0 : 0x7e00; }

}  // namespace splitkv::testing
