#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/half_convert.hpp"

namespace splitkv::detail {
namespace {

TEST(HalfConvert, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(HalfConvert, Fp16RoundTripsAndSaturates) {
  for (float f : {0.f, 1.f, -1.f, 0.5f, 65504.f, 6.1035156e-05f /* min normal */, 5.9604645e-08f /* min subnormal */}) {
    EXPECT_EQ(fp16_to_float(float_to_fp16(f)), f) << f;
  }
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_fp16(65520.f), 0x7c00);                       // rounds to +inf
  EXPECT_EQ(float_to_fp16(65519.f), 0x7bff);
  EXPECT_TRUE(std::isinf(fp16_to_float(float_to_fp16(1e9f))));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(fp16_to_float(float_to_fp16(3e-8f)), 5.9604645e-08f);  // subnormal rounding (0.503 ulp -> 1)
}

}  // namespace
}  // namespace splitkv::detail
