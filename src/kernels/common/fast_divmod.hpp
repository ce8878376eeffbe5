// Division by a divisor fixed for a whole launch (the GQA group, the query tiles per KV head, the
// split count, the page size) as one multiply and one shift. A decode block divides by these on the path from
// its first instruction to its first K/V copy; a runtime `/` compiles to ~10 instructions
// (reciprocal, two corrections), and short rows pay that path once per block.
//
// For a divisor d with l = ceil(log2 d), p = 31 + l and m = ceil(2^p / d) (< 2^32), n / d equals
// (n * m) >> p for every 0 <= n < 2^31: with m * d = 2^p + e, 0 <= e < d <= 2^l, the error term
// n * e / (d * 2^p) stays below 1 / d, so the floor never moves. tests/cpu/test_fast_divmod.cpp
// checks it against `/` and `%`.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace splitkv::detail {

struct FastDivmod {
  int divisor = 1;
  uint32_t multiplier = 1u << 31;
  uint32_t shift = 31;

  // d >= 1 (the callers validate their divisors before they build the parameters).
  static FastDivmod make(int d) {
    FastDivmod f;
    f.divisor = d;
    int l = 0;
    while ((int64_t(1) << l) < d) ++l;
    f.shift = uint32_t(31 + l);
    f.multiplier = uint32_t(((uint64_t(1) << f.shift) + uint64_t(d) - 1) / uint64_t(d));
    return f;
  }

  // n in [0, 2^31).
  SPLITKV_HD int div(int n) const { return int((uint64_t(uint32_t(n)) * multiplier) >> shift); }
  SPLITKV_HD int mod(int n) const { return n - div(n) * divisor; }
};

// Code shared by the host (plain int divisors) and the kernels (FastDivmod) divides through these.
SPLITKV_HD int divide(int n, int d) { return n / d; }
SPLITKV_HD int divide(int n, const FastDivmod& d) { return d.div(n); }
SPLITKV_HD int divisor_of(int d) { return d; }
SPLITKV_HD int divisor_of(const FastDivmod& d) { return d.divisor; }

}  // namespace splitkv::detail
