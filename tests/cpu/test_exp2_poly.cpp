// exp2_poly (the softmax's exponential on the FMA pipe) against the exact 2^x: its relative error
// over every softmax argument it takes, the flush to 0 below 2^-126 (exactly 0 for masked scores:
// -inf), NaN kept, and integer arguments exact up to the polynomial's value at 0.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/common/exp2_poly.hpp"

namespace splitkv::detail {
namespace {

TEST(Exp2Poly, RelativeErrorBelowHalfABf16UlpOverSoftmaxArguments) {
  double worst = 0.0;
  float worst_x = 0.f;
  for (int i = 0; i <= 2000000; ++i) {  // [-126, 2] in steps of 6.4e-5
    const float x = -126.f + 128.f * float(i) / 2000000.f;
    const double exact = std::exp2(double(x));
    const double err = std::fabs(double(exp2_poly(x)) / exact - 1.0);
    if (err > worst) worst = err, worst_x = x;
  }
  EXPECT_LT(worst, 8e-5) << "at x = " << worst_x;  // fitted: 7.5e-5; a bf16 ulp is 2^-8 = 3.9e-3
}

TEST(Exp2Poly, EveryFloatOfTheRoundingStepsTies) {
  // Every float in [-1, -2^-8): the ties of round(x) at -0.5 included.
  double worst = 0.0;
  for (float x = -1.f; x < -0.00390625f; x = std::nextafter(x, 1.f)) {
    worst = std::fmax(worst, std::fabs(double(exp2_poly(x)) / std::exp2(double(x)) - 1.0));
  }
  EXPECT_LT(worst, 8e-5);
}

TEST(Exp2Poly, FlushesBelowTwoToTheMinus126AndKeepsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp2_poly(-inf), 0.f);
  EXPECT_EQ(exp2_poly(-126.5f), 0.f);
  EXPECT_EQ(exp2_poly(-1e30f), 0.f);
  EXPECT_GT(exp2_poly(-126.f), 0.f);
  EXPECT_TRUE(std::isnan(exp2_poly(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Exp2Poly, IntegerArgumentsScaleThePolynomialAtZero) {
  const float at_zero = exp2_poly(0.f);
  EXPECT_NEAR(at_zero, 1.f, 8e-5f);
  for (int j = -126; j <= 127; ++j) EXPECT_EQ(exp2_poly(float(j)), std::ldexp(at_zero, j)) << j;
}

}  // namespace
}  // namespace splitkv::detail
