// Deterministic random data for tests and benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/half_convert.hpp"
#include "common/parallel_for.hpp"

namespace splitkv::testing {

// fn(first, last, generator) for the chunks [first, last) of [0, n), `chunk` items each, on all
// hardware threads; every chunk has its own generator, seeded from one draw of `rng`, so the
// values depend on that draw only, never on the thread count.
template <class Fn>
void for_each_random_chunk(int64_t n, int64_t chunk, std::mt19937_64& rng, Fn&& fn) {
  const uint64_t seed = rng();
  detail::parallel_for((n + chunk - 1) / chunk, [&](int64_t c) {
    std::mt19937_64 generator(seed + 0x9E3779B97F4A7C15ull * uint64_t(c + 1));
    fn(c * chunk, std::min(n, (c + 1) * chunk), generator);
  });
}

// set(i, x) for i in [0, n) with x standard normal times `scale`, 64K elements per chunk.
template <class Set>
void fill_normal_chunks(int64_t n, std::mt19937_64& rng, float scale, Set&& set) {
  for_each_random_chunk(n, int64_t(1) << 16, rng, [&](int64_t first, int64_t last, std::mt19937_64& generator) {
    std::normal_distribution<float> normal(0.f, 1.f);
    for (int64_t i = first; i < last; ++i) set(i, normal(generator) * scale);
  });
}

// Standard normal values times `scale`, rounded to dtype, as element bits.
inline void fill_normal(std::vector<uint16_t>& bits, DType dtype, std::mt19937_64& rng, float scale = 1.f) {
  fill_normal_chunks(int64_t(bits.size()), rng, scale,
                     [&](int64_t i, float x) { bits[size_t(i)] = detail::float_to_half_bits(x, dtype); });
}

inline uint16_t nan_bits(DType dtype) { return dtype == DType::kBF16 ? 0x7fc0 : 0x7e00; }

}  // namespace splitkv::testing
