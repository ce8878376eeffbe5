// The tolerance rule every GPU test applies (testing/compare.cpp, docs/BENCHMARKING.md): each of its
// promises must be able to fail.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "testing/compare.hpp"

namespace splitkv::testing {
namespace {

// Two rows of two output elements; exact reference values, a yardstick `lowp_out_err` and
// `lowp_lse_err` away from them.
struct Rows {
  ref::Result exact{{1.0, -2.0, 0.5, 0.25}, {3.0, 10.0}};
  ref::Result low = exact;
  std::vector<double> out = exact.out;
  std::vector<double> lse = exact.lse;

  Rows(double lowp_out_err, double lowp_lse_rel) {
    low.out[1] += lowp_out_err;
    low.lse[1] += lowp_lse_rel * std::abs(exact.lse[1]);
  }
  Comparison compare() const { return compare_with_reference(exact, low, out, lse); }
};

TEST(Compare, OutputWithinTwiceTheYardstickPassesAndBeyondFails) {
  Rows r(1e-3, 0);
  r.out[2] += 2e-3;  // exactly 2x the yardstick
  EXPECT_TRUE(r.compare().passed) << r.compare().summary();
  r.out[2] += 1e-4;
  EXPECT_FALSE(r.compare().passed) << r.compare().summary();
}

TEST(Compare, LseWithinOneThousandthPassesWhenTheYardstickIsExact) {
  Rows r(1e-3, 0);
  r.lse[1] = r.exact.lse[1] * (1 + 0.9e-3);
  EXPECT_TRUE(r.compare().passed) << r.compare().summary();
  r.lse[1] = r.exact.lse[1] * (1 + 1.5e-3);
  EXPECT_FALSE(r.compare().passed) << r.compare().summary();
}

TEST(Compare, LseMayBeTwiceAsFarAsTheYardsticksOwnError) {
  // A yardstick that reads K rounded to the dtype (a quantized cache read through a 16-bit copy)
  // is itself 2e-3 off: the kernel may be up to 4e-3 off, not more.
  Rows r(1e-3, 2e-3);
  r.lse[1] = r.exact.lse[1] * (1 + 3.9e-3);
  EXPECT_TRUE(r.compare().passed) << r.compare().summary();
  EXPECT_NEAR(r.compare().lowp_lse_max_rel_err, 2e-3, 1e-12);
  r.lse[1] = r.exact.lse[1] * (1 + 4.2e-3);
  EXPECT_FALSE(r.compare().passed) << r.compare().summary();
}

TEST(Compare, NanNeverPassesAndMinusInfinityOnlyWhereTheReferenceHasIt) {
  Rows r(1e-3, 0);
  r.out[0] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(r.compare().passed);
  EXPECT_EQ(r.compare().bad_values, 1);

  Rows empty(1e-3, 0);  // a row that sees no key: LSE -inf in the reference and the kernel
  empty.exact.lse[0] = empty.low.lse[0] = empty.lse[0] = -std::numeric_limits<double>::infinity();
  EXPECT_TRUE(empty.compare().passed) << empty.compare().summary();
  empty.lse[1] = -std::numeric_limits<double>::infinity();  // -inf where the reference is finite
  EXPECT_FALSE(empty.compare().passed);
}

}  // namespace
}  // namespace splitkv::testing
