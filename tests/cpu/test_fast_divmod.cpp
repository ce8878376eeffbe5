// FastDivmod against the hardware `/` and `%`: every divisor up to 4096 over a sweep of
// dividends, and the edges (powers of two, the largest divisors, dividends near 2^31) where a
// multiplier rounded the wrong way or one bit short gives a quotient off by one.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/common/fast_divmod.hpp"

namespace splitkv::detail {
namespace {

std::vector<int> edge_dividends(int d) {
  const int64_t D = d;
  std::vector<int64_t> candidates = {0, 1, D - 1, D, D + 1, 2 * D - 1, 2 * D, 1000003, INT32_MAX, INT32_MAX - 1};
  for (int64_t k : {int64_t(INT32_MAX) / D, int64_t(INT32_MAX) / D - 1}) {
    for (int64_t off = -1; off <= 1; ++off) candidates.push_back(k * D + off);
  }
  std::vector<int> n;
  for (int64_t x : candidates) {
    if (x >= 0 && x <= INT32_MAX) n.push_back(int(x));
  }
  return n;
}

void expect_exact(int d, int n) {
  const FastDivmod f = FastDivmod::make(d);
  ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  ASSERT_EQ(f.mod(n), n % d) << n << " % " << d;
}

TEST(FastDivmod, SmallDivisorsOverManyDividends) {
  for (int d = 1; d <= 4096; ++d) {
    for (int n = 0; n < 4 * d + 70000; n += 1 + n / 997) expect_exact(d, n);
    for (int n : edge_dividends(d)) expect_exact(d, n);
  }
}

TEST(FastDivmod, PowersOfTwoAndLargeDivisors) {
  std::vector<int> divisors;
  for (int l = 0; l <= 30; ++l) divisors.insert(divisors.end(), {1 << l, (1 << l) + 1, (1 << l) - 1 > 0 ? (1 << l) - 1 : 1});
  divisors.insert(divisors.end(), {INT32_MAX, INT32_MAX - 1, 1000003, 65537, 46341});
  for (int d : divisors) {
    for (int n : edge_dividends(d)) expect_exact(d, n);
  }
}

}  // namespace
}  // namespace splitkv::detail
