// The host quantizer of the quantized KV formats (src/quant/kv_quant_host.hpp, docs/KV_FORMATS.md):
// FP8 e4m3 exhaustively and against a search over every code; INT8/INT4 rows against their error
// bound, the scale rule, the code rule, the special rows and the packing; the bytes-per-token
// table; the strided cache helper.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/half_convert.hpp"
#include "quant/kv_quant_host.hpp"

namespace splitkv::quant {
namespace {

using detail::float_to_fp16;
using detail::fp16_to_float;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- FP8 ---------------------------------------------------------------------------------------

bool is_e4m3_nan_code(int c) { return (c & 0x7f) == 0x7f; }

// The nearest finite e4m3 value by search over all codes of the sign, ties to the even code
// (the even mantissa), saturating to +-448; NaN -> 0x7f.
uint8_t e4m3_by_search(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const double a = std::fabs(double(f));
  if (std::isinf(f)) return sign | 0x7e;
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7e; ++c) {
    const double err = std::fabs(a - double(e4m3_to_float(uint8_t(c))));
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return uint8_t(sign | best);
}

TEST(KvQuantFp8, EveryCodeDecodesAndReencodesToItself) {
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_float(uint8_t(c));
    if (is_e4m3_nan_code(c)) {
      ++nan_codes;
      EXPECT_TRUE(std::isnan(v)) << c;
      EXPECT_TRUE(std::isnan(e4m3_to_float(float_to_e4m3(v)))) << c;  // NaN stays NaN
      continue;
    }
    ASSERT_TRUE(std::isfinite(v)) << c;
    EXPECT_EQ(float_to_e4m3(v), c) << "code " << c << " value " << v;
    EXPECT_EQ(std::signbit(v), (c & 0x80) != 0) << c;
  }
  EXPECT_EQ(nan_codes, 2);  // S.1111.111 only: no infinities, 0x7e / 0xfe are +-448
  // Positive codes are ordered like their values.
  for (int c = 1; c <= 0x7e; ++c) EXPECT_LT(e4m3_to_float(uint8_t(c - 1)), e4m3_to_float(uint8_t(c))) << c;
}

TEST(KvQuantFp8, KnownValues) {
  EXPECT_EQ(e4m3_to_float(0x00), 0.f);
  EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7 * std::ldexp(1.f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.f);                  // 0.0111.000
  EXPECT_EQ(e4m3_to_float(0x3c), 1.5f);
  EXPECT_EQ(e4m3_to_float(0xc0), -2.f);
  EXPECT_EQ(e4m3_to_float(0x77), 240.f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.f);
  EXPECT_EQ(float_to_e4m3(1.f), 0x38);
  EXPECT_EQ(float_to_e4m3(-0.f), 0x80);
}

TEST(KvQuantFp8, TiesRoundToEvenAndNeighboursToNearest) {
  for (int sign : {0, 0x80}) {
    for (int c = 0; c < 0x7e; ++c) {
      const float lo = e4m3_to_float(uint8_t(sign | c)), hi = e4m3_to_float(uint8_t(sign | (c + 1)));
      const float mid = 0.5f * (lo + hi);  // exact: one more mantissa bit than e4m3 has
      ASSERT_EQ(double(mid), 0.5 * (double(lo) + double(hi)));
      const int even = (c % 2 == 0) ? c : c + 1;
      EXPECT_EQ(float_to_e4m3(mid), sign | even) << "tie between codes " << c << " and " << c + 1;
      EXPECT_EQ(float_to_e4m3(std::nextafter(mid, lo)), sign | c) << c;
      EXPECT_EQ(float_to_e4m3(std::nextafter(mid, hi)), sign | (c + 1)) << c;
    }
  }
}

TEST(KvQuantFp8, MatchesTheNearestCodeSearch) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> expo(-13, 10);
  int checked = 0;
  for (int i = 0; i < 100000; ++i) {
    float f = std::ldexp(mant(rng), expo(rng));
    if (i & 1) f = -f;
    ASSERT_EQ(float_to_e4m3(f), e4m3_by_search(f)) << f;
    ++checked;
  }
  for (float f : {0.f, -0.f, 1e-30f, -1e-30f, std::ldexp(1.f, -10), std::ldexp(3.f, -11), 0.0146484375f,
                  447.f, 448.f, 455.f, 464.f, 464.0001f, 480.f, 1e6f, -1e30f, kInf, -kInf,
                  std::numeric_limits<float>::denorm_min()}) {
    EXPECT_EQ(float_to_e4m3(f), e4m3_by_search(f)) << f;
    ++checked;
  }
  EXPECT_GT(checked, 100000);
}

TEST(KvQuantFp8, SaturatesAndKeepsNaN) {
  for (float f : {448.f, 448.5f, 464.f, 465.f, 480.f, 1e6f, 3e38f, kInf}) {
    EXPECT_EQ(float_to_e4m3(f), 0x7e) << f;
    EXPECT_EQ(float_to_e4m3(-f), 0xfe) << f;
  }
  EXPECT_EQ(float_to_e4m3(kNaN), kE4M3NaN);
  EXPECT_EQ(float_to_e4m3(-kNaN), kE4M3NaN);
  EXPECT_TRUE(std::isnan(e4m3_to_float(float_to_e4m3(kNaN))));
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.f, -10)), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(float_to_e4m3(std::nextafter(std::ldexp(1.f, -10), 1.f)), 0x01);
  EXPECT_EQ(float_to_e4m3(-std::ldexp(1.f, -11)), 0x80);  // rounds to -0
}

TEST(KvQuantFp8, RowDividesByTheScaleAndReadsBack) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int row = 0; row < 200; ++row) {
    const int d = 128;
    std::vector<float> x(d);
    float amax = 0.f;
    for (float& v : x) amax = std::max(amax, std::fabs(v = normal(rng) * (row % 5 + 1)));
    const float scale = (row % 3 == 2) ? amax / 900.f : amax / 448.f;  // some rows saturate
    std::vector<uint8_t> codes(d);
    std::vector<float> y(d);
    quantize_row_fp8(x.data(), d, scale, codes.data());
    dequantize_row_fp8(codes.data(), d, scale, y.data());
    for (int i = 0; i < d; ++i) {
      ASSERT_EQ(codes[i], float_to_e4m3(x[i] / scale)) << row << " " << i;
      ASSERT_EQ(y[i], scale * e4m3_to_float(codes[i]));
      const float f = x[i] / scale;
      if (std::fabs(f) > kE4M3Max) {
        EXPECT_EQ(y[i], std::copysign(scale * kE4M3Max, x[i]));
      } else {
        // Half an e4m3 ulp: 2^-4 relative for normals, 2^-10 absolute among the subnormals.
        const double bound = std::max(std::fabs(double(f)) / 16.0, std::ldexp(1.0, -10)) * scale +
                             std::fabs(double(x[i])) * std::ldexp(1.0, -20);  // + the fp32 roundings
        EXPECT_LE(std::fabs(double(x[i]) - double(y[i])), bound) << row << " " << i;
      }
    }
  }
}

TEST(KvQuantFp8, RowDividesNotMultipliesByTheReciprocal) {
  // 0.0213623046875 / 0.109375 = 0.1953125 exactly: the tie between 0.1875 (mantissa 100) and
  // 0.203125 (101), so 0.1875 (0x24). Times fp32(1 / 0.109375), it lands just past the tie: 0x25.
  const float x[2] = {0.0213623046875f, -0.0213623046875f};
  const float scale = 0.109375f;
  uint8_t codes[2];
  quantize_row_fp8(x, 2, scale, codes);
  EXPECT_EQ(codes[0], 0x24);
  EXPECT_EQ(codes[1], 0xa4);
  ASSERT_EQ(float_to_e4m3(x[0] * (1.f / scale)), 0x25);  // what the reciprocal would give
}

TEST(KvQuantFp8, RowRejectsScalesThatAreNotPositiveAndFinite) {
  const float x[2] = {1.f, 2.f};
  uint8_t codes[2] = {0xab, 0xab};
  for (float scale : {0.f, -1.f, kNaN, kInf}) {
    EXPECT_EQ(check_fp8_row(2, scale).argument(), "scale") << scale;
    EXPECT_THROW(quantize_row_fp8(x, 2, scale, codes), Error) << scale;
  }
  EXPECT_EQ(codes[0], 0xab);  // nothing written
  EXPECT_EQ(check_fp8_row(0, 1.f).argument(), "head_dim");
  EXPECT_TRUE(check_fp8_row(1, 1e-30f).ok());
}

// ---- INT8 / INT4 ---------------------------------------------------------------------------------

struct Quantized {
  RowScale s;
  std::vector<uint8_t> codes;
  std::vector<float> y;  // dequantized
};

Quantized round_trip(const std::vector<float>& x, int bits, uint8_t fill = 0xa5) {
  Quantized q;
  const int d = int(x.size());
  q.codes.assign(size_t(packed_row_bytes(d, bits)), fill);
  q.s = quantize_row_int(x.data(), d, bits, q.codes.data());
  q.y.assign(size_t(d), kNaN);
  dequantize_row_int(q.codes.data(), d, bits, q.s, q.y.data());
  return q;
}

float row_min(const std::vector<float>& x) { return *std::min_element(x.begin(), x.end()); }
float row_max(const std::vector<float>& x) { return *std::max_element(x.begin(), x.end()); }

// min16 + n * s >= target, in exact (double) arithmetic.
bool reaches(uint16_t min16, int n, uint16_t s, float target) {
  return double(fp16_to_float(min16)) + double(n) * double(fp16_to_float(s)) >= double(target);
}

// |x - deq(q(x))| <= scale/2 + |min - min16| per element (plus fp32 rounding), and the tighter
// split: values at or above min16 within scale/2, values below it within min16 - min (a constant
// row reads back as min16 everywhere).
void expect_error_bound(const std::vector<float>& x, const Quantized& q, const char* what) {
  const double min16 = fp16_to_float(q.s.min_fp16), scale = fp16_to_float(q.s.scale_fp16);
  const double min_rounding = std::fabs(double(row_min(x)) - min16);
  for (size_t i = 0; i < x.size(); ++i) {
    const double err = std::fabs(double(x[i]) - double(q.y[i]));
    const double slack = scale * 1e-4 + std::fabs(double(x[i])) * std::ldexp(1.0, -22) + 1e-30;
    ASSERT_LE(err, scale / 2 + min_rounding + slack) << what << " element " << i << " x " << x[i];
    if (row_max(x) == row_min(x)) {  // constant row: scale 0, everything reads back as min16
      ASSERT_EQ(double(q.y[i]), min16) << what << " element " << i;
    } else if (double(x[i]) >= min16) {
      ASSERT_LE(err, scale / 2 + slack) << what << " element " << i << " x " << x[i];
    } else {
      ASSERT_LE(err, min16 - double(row_min(x)) + slack) << what << " element " << i;
    }
  }
}

// The code rule, recomputed: q = clamp(rne((x - min16) / scale16), 0, 2^bits - 1) in fp32 (codes 0
// when the scale is 0 or the row is NaN). Catches codes that wrap or spill into a neighbour nibble.
void expect_codes_follow_the_rule(const std::vector<float>& x, int bits, const Quantized& q) {
  const float min16 = fp16_to_float(q.s.min_fp16), scale = fp16_to_float(q.s.scale_fp16);
  const int n = max_code(bits);
  for (int i = 0; i < int(x.size()); ++i) {
    const int code = unpack_code(q.codes.data(), i, bits);
    ASSERT_GE(code, 0);
    ASSERT_LE(code, n);
    int expected = 0;
    if (scale > 0.f && !std::isnan(scale)) {
      const double t = std::nearbyint((x[i] - min16) / scale);
      expected = int(std::clamp(t, 0.0, double(n)));
    }
    ASSERT_EQ(code, expected) << "element " << i << " x " << x[i];
  }
}

std::vector<std::vector<float>> random_rows(uint64_t seed, bool outliers) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  std::vector<std::vector<float>> rows;
  const float means[] = {0.f, 3.f, -100.f, 0.25f};
  const float sigmas[] = {1.f, 0.01f, 1000.f, 1e-3f};
  const int dims[] = {128, 64, 256, 2, 10};
  for (int r = 0; r < 1500; ++r) {
    std::vector<float> x(size_t(dims[r % 5]));
    const float mu = means[(r / 5) % 4], sigma = sigmas[(r / 20) % 4];
    for (float& v : x) v = mu + sigma * normal(rng);
    if (outliers) {
      const int count = 1 + r % 3;
      for (int k = 0; k < count; ++k) {
        const float mag = std::min(sigma * float(20 + pick(rng) % 480), 60000.f);  // within fp16
        x[size_t(pick(rng)) % x.size()] = mu + ((pick(rng) & 1) ? mag : -mag);
      }
    }
    rows.push_back(std::move(x));
  }
  return rows;
}

TEST(KvQuantInt, RoundTripWithinBoundOnNormalRows) {
  for (int bits : {8, 4}) {
    for (const auto& x : random_rows(1, false)) {
      const Quantized q = round_trip(x, bits);
      expect_error_bound(x, q, bits == 8 ? "int8" : "int4");
    }
  }
}

TEST(KvQuantInt, RoundTripWithinBoundOnRowsWithOutliers) {
  for (int bits : {8, 4}) {
    for (const auto& x : random_rows(2, true)) {
      const Quantized q = round_trip(x, bits);
      expect_error_bound(x, q, bits == 8 ? "int8 outliers" : "int4 outliers");
    }
  }
}

TEST(KvQuantInt, MinIsRoundedFirstAndScaleIsTheSmallestThatReachesTheMax) {
  int checked = 0, scale_zero = 0, saturated = 0;
  for (int bits : {8, 4}) {
    const int n = max_code(bits);
    for (bool outliers : {false, true}) {
      for (const auto& x : random_rows(3, outliers)) {
        const Quantized q = round_trip(x, bits);
        const float mn = row_min(x), mx = row_max(x);
        // fp16(min), nearest even, saturated to +-65504 (no random row reaches that; the
        // BeyondTheFp16Range test does).
        uint16_t min16 = float_to_fp16(mn);
        if ((min16 & 0x7fff) == 0x7c00) {
          min16 = uint16_t((min16 & 0x8000) | kFp16MaxFinite);
          ++saturated;
        }
        ASSERT_EQ(q.s.min_fp16, min16) << mn;
        if (mx == mn) {  // constant (outliers capped to the same value): scale 0 by definition
          ASSERT_EQ(q.s.scale_fp16, 0);
          continue;
        }
        ASSERT_TRUE(reaches(q.s.min_fp16, n, q.s.scale_fp16, mx)) << "max code falls short of " << mx;
        if (q.s.scale_fp16 == 0) {  // narrow rows far from 0: min16 rounded up past the max
          ++scale_zero;
          continue;
        }
        ASSERT_FALSE(reaches(q.s.min_fp16, n, uint16_t(q.s.scale_fp16 - 1), mx)) << "scale not the smallest";
        ++checked;
        // With a normal scale, rounding it up adds at most n fp16 ulps (n * 2^-10 steps, under a
        // quarter step) to the top of the range: the row's maximum gets the largest code.
        if (q.s.scale_fp16 >= 0x0400) {
          const int at_max = unpack_code(q.codes.data(), int(std::max_element(x.begin(), x.end()) - x.begin()), bits);
          ASSERT_EQ(at_max, n);
        }
      }
    }
  }
  EXPECT_GT(checked, 5000);
  EXPECT_GT(scale_zero, 0);  // the rule for these rows is exercised too
  EXPECT_EQ(saturated, 0);
}

TEST(KvQuantInt, CodesFollowTheRuleAndStayInRange) {
  for (int bits : {8, 4}) {
    for (bool outliers : {false, true}) {
      for (const auto& x : random_rows(4, outliers)) expect_codes_follow_the_rule(x, bits, round_trip(x, bits));
    }
    // Rows whose codes would overflow without the clamp: values below a min16 that rounded up,
    // and a saturated scale.
    const std::vector<std::vector<float>> edge = {
        {1.0007f, 1.0008f, 1.5f, 1.0007f}, {-1e6f, 1e6f, 0.f, 65504.f}, {0.f, 1e7f, 5e6f, 9.9e6f}};
    for (const auto& x : edge) expect_codes_follow_the_rule(x, bits, round_trip(x, bits));
  }
}

TEST(KvQuantInt, CodesRoundHalfToEven) {
  // min 0 and max 2^bits - 1 give scale exactly 1, so the codes are the values rounded.
  const Quantized q8 = round_trip({0.f, 255.f, 2.5f, 3.5f, 100.5f, 101.5f, 254.5f, 0.5f}, 8);
  EXPECT_EQ(q8.s.scale_fp16, 0x3c00);
  EXPECT_EQ(q8.s.min_fp16, 0x0000);
  const std::vector<int> want8 = {0, 255, 2, 4, 100, 102, 254, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(unpack_code(q8.codes.data(), i, 8), want8[size_t(i)]) << i;
  const Quantized q4 = round_trip({0.f, 15.f, 0.5f, 1.5f, 2.5f, 14.5f}, 4);
  EXPECT_EQ(q4.s.scale_fp16, 0x3c00);
  const std::vector<int> want4 = {0, 15, 0, 2, 2, 14};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(unpack_code(q4.codes.data(), i, 4), want4[size_t(i)]) << i;
}

TEST(KvQuantInt, ConstantRowsStoreScaleZeroAndCodesZero) {
  for (int bits : {8, 4}) {
    for (float v : {1.0003f, 0.f, -7.5f, 65504.f, 1e-7f, -3e-5f, 60000.f}) {
      const std::vector<float> x(16, v);
      const Quantized q = round_trip(x, bits, 0xff);
      EXPECT_EQ(q.s.scale_fp16, 0) << v;
      EXPECT_EQ(q.s.min_fp16, float_to_fp16(v)) << v;
      for (uint8_t c : q.codes) EXPECT_EQ(c, 0) << v;
      for (float y : q.y) EXPECT_EQ(y, fp16_to_float(q.s.min_fp16)) << v;  // exactly min16
    }
  }
}

TEST(KvQuantInt, RowBelowItsRoundedMinStoresScaleZero) {
  // min 1.0007 rounds up to 1 + 2^-10 = 1.000977, above the row's max: nothing to scale.
  const std::vector<float> x = {1.0007f, 1.0008f, 1.00075f, 1.0007f};
  for (int bits : {8, 4}) {
    const Quantized q = round_trip(x, bits);
    EXPECT_EQ(q.s.min_fp16, 0x3c01);
    EXPECT_EQ(q.s.scale_fp16, 0);
    for (float y : q.y) EXPECT_EQ(y, fp16_to_float(0x3c01));
    expect_error_bound(x, q, "below min16");
  }
}

TEST(KvQuantInt, TinyRangesGetAPositiveSubnormalScale) {
  const std::vector<std::vector<float>> rows = {
      {1e-6f, 2e-6f, 1.5e-6f, 1.2e-6f}, {0.f, 1e-9f, 5e-10f, 0.f}, {-3e-7f, 3e-7f, 0.f, 1e-7f}};
  for (int bits : {8, 4}) {
    for (const auto& x : rows) {
      const Quantized q = round_trip(x, bits);
      EXPECT_GT(q.s.scale_fp16, 0);
      EXPECT_LT(q.s.scale_fp16, 0x0400);  // subnormal fp16
      for (float y : q.y) EXPECT_TRUE(std::isfinite(y));
      expect_error_bound(x, q, "tiny");
      expect_codes_follow_the_rule(x, bits, q);
    }
  }
}

TEST(KvQuantInt, NearTheFp16RangeNothingOverflows) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> uni(-60000.f, 60000.f);
  std::vector<std::vector<float>> rows;
  std::vector<float> wide(128);
  for (float& v : wide) v = uni(rng);
  wide[3] = -60000.f;
  wide[77] = 60000.f;
  rows.push_back(wide);
  rows.push_back({-65504.f, 65504.f, 0.f, 1.f, -65504.f, 65504.f});
  rows.push_back({60000.f, 60000.f, 60000.f, -60000.f});
  rows.push_back({-60000.f, -59999.f, -60000.f, -59000.f});
  for (int bits : {8, 4}) {
    for (const auto& x : rows) {
      const Quantized q = round_trip(x, bits);
      // max - min reaches 131008, twice the fp16 range; the scale is computed exactly and stays finite.
      EXPECT_LT(q.s.scale_fp16, 0x7c00);
      EXPECT_LT(q.s.min_fp16 & 0x7fff, 0x7c00);
      for (float y : q.y) ASSERT_TRUE(std::isfinite(y));
      expect_error_bound(x, q, "near fp16 range");
      expect_codes_follow_the_rule(x, bits, q);
      EXPECT_TRUE(reaches(q.s.min_fp16, max_code(bits), q.s.scale_fp16, row_max(x)));
    }
  }
}

TEST(KvQuantInt, BeyondTheFp16RangeMinAndScaleSaturate) {
  for (int bits : {8, 4}) {
    // min -1e6 saturates to -65504; values below it read back as -65504.
    const std::vector<float> x = {-1e6f, 5e5f, 0.f, -65504.f, 1000.f, -70000.f};
    const Quantized q = round_trip(x, bits);
    EXPECT_EQ(q.s.min_fp16, 0xfbff);
    EXPECT_LT(q.s.scale_fp16, 0x7c00);
    for (float y : q.y) ASSERT_TRUE(std::isfinite(y));
    EXPECT_EQ(q.y[0], -65504.f);
    EXPECT_EQ(q.y[5], -65504.f);
    const double scale = fp16_to_float(q.s.scale_fp16);
    for (int i : {1, 2, 3, 4}) EXPECT_LE(std::fabs(double(x[size_t(i)]) - q.y[size_t(i)]), scale / 2 * (1 + 1e-4)) << i;
    expect_codes_follow_the_rule(x, bits, q);
  }
  // (1e7 - 0) / 15 exceeds 65504: the INT4 scale saturates, the top code clamps, nothing is inf.
  const std::vector<float> x = {0.f, 1e7f, 5e6f, 100.f};
  const Quantized q = round_trip(x, 4);
  EXPECT_EQ(q.s.scale_fp16, kFp16MaxFinite);
  EXPECT_EQ(unpack_code(q.codes.data(), 1, 4), 15);
  EXPECT_EQ(q.y[1], 15.f * 65504.f);
  for (float y : q.y) EXPECT_TRUE(std::isfinite(y));
}

TEST(KvQuantInt, Int4PacksElement2iInTheLowNibble) {
  // min 0, max 15: scale 1 and the codes are the values.
  const std::vector<float> x = {3.f, 12.f, 0.f, 15.f, 7.f, 1.f, 9.f, 9.f};
  const Quantized q = round_trip(x, 4);
  ASSERT_EQ(q.s.scale_fp16, 0x3c00);
  ASSERT_EQ(q.codes.size(), 4u);
  EXPECT_EQ(q.codes[0], 0xc3);
  EXPECT_EQ(q.codes[1], 0xf0);
  EXPECT_EQ(q.codes[2], 0x17);
  EXPECT_EQ(q.codes[3], 0x99);
  // And the reader takes them in that order.
  const uint8_t bytes[2] = {0x21, 0x4f};
  float y[4];
  dequantize_row_int(bytes, 4, 4, RowScale{0x3c00, 0xbc00 /* -1 */}, y);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 1.f);
  EXPECT_EQ(y[2], 14.f);
  EXPECT_EQ(y[3], 3.f);
}

TEST(KvQuantInt, NonFiniteRowsReadBackNaNAndDisturbNothingElse) {
  for (int bits : {8, 4}) {
    const int d = 128, rows = 6;
    std::mt19937_64 rng(9);
    std::normal_distribution<float> normal(0.f, 2.f);
    std::vector<std::vector<float>> x(rows, std::vector<float>(d));
    for (auto& r : x) for (float& v : r) v = normal(rng);
    x[1][40] = kNaN;
    x[3][127] = kInf;
    x[4][0] = -kInf;
    std::vector<uint8_t> codes(size_t(rows * packed_row_bytes(d, bits)), 0x77);
    std::vector<uint16_t> scales(size_t(rows * 2), 0x1234);
    IntCacheView view;  // one block, one head: [1, rows, 1, d] and [1, 1, rows, 2]
    view.bits = bits;
    view.head_dim = d;
    view.codes = codes.data();
    view.code_stride_slot = d;
    view.scales = scales.data();
    view.scale_stride_slot = 2;
    for (int r = 0; r < rows; ++r) write_cache_row(view, 0, r, 0, x[size_t(r)].data());
    for (int r = 0; r < rows; ++r) {
      std::vector<float> y(d);
      read_cache_row(view, 0, r, 0, y.data());
      const uint8_t* rc = codes.data() + r * packed_row_bytes(d, bits);
      if (r == 1 || r == 3 || r == 4) {
        EXPECT_EQ(scales[size_t(2 * r)], kFp16NaN);
        EXPECT_EQ(scales[size_t(2 * r + 1)], kFp16NaN);
        for (int b = 0; b < packed_row_bytes(d, bits); ++b) ASSERT_EQ(rc[b], 0) << r;
        for (float v : y) ASSERT_TRUE(std::isnan(v)) << r;
      } else {
        const Quantized alone = round_trip(x[size_t(r)], bits);
        EXPECT_EQ(scales[size_t(2 * r)], alone.s.scale_fp16);
        EXPECT_EQ(scales[size_t(2 * r + 1)], alone.s.min_fp16);
        EXPECT_EQ(std::memcmp(rc, alone.codes.data(), alone.codes.size()), 0) << r;
        for (float v : y) ASSERT_TRUE(std::isfinite(v)) << r;
      }
    }
  }
}

TEST(KvQuantInt, ZeroMinIsStoredAsPositiveZero) {
  for (int bits : {8, 4}) {
    EXPECT_EQ(round_trip({-0.f, 1.f}, bits).s.min_fp16, 0x0000);
    EXPECT_EQ(round_trip({0.f, -0.f, 2.f, 0.f}, bits).s.min_fp16, 0x0000);
    EXPECT_EQ(round_trip({-0.f, -0.f}, bits).s.min_fp16, 0x0000);
    EXPECT_EQ(round_trip({-1e-9f, 1.f}, bits).s.min_fp16, 0x0000);  // -1e-9 rounds to -0 in fp16
  }
}

TEST(KvQuantInt, SameRowSameBits) {
  for (int bits : {8, 4}) {
    const auto rows = random_rows(6, true);
    std::vector<Quantized> first;
    for (const auto& x : rows) first.push_back(round_trip(x, bits, 0x00));
    // Other output contents, and the rows in reverse order: every bit is written and nothing
    // carries over from one row to the next.
    for (uint8_t fill : {uint8_t(0xff), uint8_t(0x5a)}) {
      for (size_t r = rows.size(); r-- > 0;) {
        const Quantized again = round_trip(rows[r], bits, fill);
        ASSERT_EQ(again.s.scale_fp16, first[r].s.scale_fp16);
        ASSERT_EQ(again.s.min_fp16, first[r].s.min_fp16);
        ASSERT_EQ(again.codes, first[r].codes) << r;
        ASSERT_EQ(std::memcmp(again.y.data(), first[r].y.data(), again.y.size() * sizeof(float)), 0);
      }
    }
  }
}

TEST(KvQuantInt, RejectsShapesTheFormatCannotHold) {
  const float x[4] = {1.f, 2.f, 3.f, 4.f};
  uint8_t codes[4] = {0xab, 0xab, 0xab, 0xab};
  EXPECT_EQ(check_int_row(3, 4).argument(), "head_dim");
  EXPECT_EQ(check_int_row(0, 8).argument(), "head_dim");
  EXPECT_EQ(check_int_row(4, 5).argument(), "bits");
  EXPECT_TRUE(check_int_row(3, 8).ok());
  EXPECT_TRUE(check_int_row(2, 4).ok());
  EXPECT_THROW(quantize_row_int(x, 3, 4, codes), Error);
  EXPECT_THROW(quantize_row_int(x, 4, 2, codes), Error);
  for (uint8_t c : codes) EXPECT_EQ(c, 0xab);  // nothing written
  float y[3];
  EXPECT_THROW(dequantize_row_int(codes, 3, 4, RowScale{}, y), Error);
  try {
    quantize_row_int(x, 3, 4, codes);
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("even"), std::string::npos) << e.what();
  }
}

// ---- bytes per token and KV head -----------------------------------------------------------------

TEST(KvQuantBytes, PerTokenAndKvHead) {
  struct Row {
    KvFormat format;
    int d;
    int64_t k_data, k_scales, v_data, v_scales, total, per_head;
  };
  const Row table[] = {
      {KvFormat::kBF16, 128, 256, 0, 256, 0, 512, 0},   {KvFormat::kF16, 128, 256, 0, 256, 0, 512, 0},
      {KvFormat::kNative, 128, 256, 0, 256, 0, 512, 0}, {KvFormat::kFP8E4M3, 128, 128, 0, 128, 0, 256, 8},
      {KvFormat::kInt8, 128, 128, 4, 128, 4, 264, 0},   {KvFormat::kInt4, 128, 64, 4, 64, 4, 136, 0},
      {KvFormat::kK8V4, 128, 128, 4, 64, 4, 200, 0},    {KvFormat::kBF16, 64, 128, 0, 128, 0, 256, 0},
      {KvFormat::kInt8, 64, 64, 4, 64, 4, 136, 0},      {KvFormat::kInt4, 64, 32, 4, 32, 4, 72, 0},
      {KvFormat::kK8V4, 64, 64, 4, 32, 4, 104, 0},      {KvFormat::kFP8E4M3, 256, 256, 0, 256, 0, 512, 8},
      {KvFormat::kInt4, 256, 128, 4, 128, 4, 264, 0},   {KvFormat::kK8V4, 256, 256, 4, 128, 4, 392, 0},
      {KvFormat::kInt8, 127, 127, 4, 127, 4, 262, 0},
  };
  for (const Row& r : table) {
    const TokenHeadBytes b = token_head_bytes(r.format, r.d);
    SCOPED_TRACE(std::string(to_string(r.format)) + " D=" + std::to_string(r.d));
    EXPECT_EQ(b.k_data, r.k_data);
    EXPECT_EQ(b.k_scales, r.k_scales);
    EXPECT_EQ(b.v_data, r.v_data);
    EXPECT_EQ(b.v_scales, r.v_scales);
    EXPECT_EQ(b.total(), r.total);
    EXPECT_EQ(b.per_head_scale_bytes, r.per_head);
  }
  // The row functions write exactly the data bytes the table counts.
  EXPECT_EQ(packed_row_bytes(128, 8), token_head_bytes(KvFormat::kInt8, 128).k_data);
  EXPECT_EQ(packed_row_bytes(128, 4), token_head_bytes(KvFormat::kInt4, 128).v_data);
}

TEST(KvQuantBytes, RejectsOddHeadDimsWithAnInt4Side) {
  EXPECT_EQ(check_token_head_bytes(KvFormat::kInt4, 127).argument(), "head_dim");
  EXPECT_EQ(check_token_head_bytes(KvFormat::kK8V4, 127).argument(), "head_dim");
  EXPECT_EQ(check_token_head_bytes(KvFormat::kBF16, 0).argument(), "head_dim");
  EXPECT_EQ(check_token_head_bytes(static_cast<KvFormat>(42), 128).argument(), "kv_format");
  EXPECT_TRUE(check_token_head_bytes(KvFormat::kFP8E4M3, 127).ok());
  EXPECT_THROW(token_head_bytes(KvFormat::kK8V4, 65), Error);
}

// ---- the strided cache helper --------------------------------------------------------------------

TEST(KvQuantCache, PagedStridedViewWritesOnlyItsRow) {
  for (int bits : {4, 8}) {
    const int pages = 3, page_size = 4, hkv = 2, d = 8;
    // Padded strides everywhere: codes [pages, page_size, Hkv, D] in code elements,
    // scales [pages, Hkv, page_size, 2] in fp16 elements.
    IntCacheView v;
    v.bits = bits;
    v.head_dim = d;
    v.code_stride_head = d + 8;
    v.code_stride_slot = hkv * v.code_stride_head + 4;
    v.code_stride_block = page_size * v.code_stride_slot + 12;
    v.scale_stride_slot = 2;
    v.scale_stride_head = page_size * 2 + 2;
    v.scale_stride_block = hkv * v.scale_stride_head + 6;
    std::vector<uint8_t> codes(size_t(pages * v.code_stride_block * bits / 8), 0xee);
    std::vector<uint16_t> scales(size_t(pages * v.scale_stride_block), 0xbeef);
    v.codes = codes.data();
    v.scales = scales.data();
    ASSERT_TRUE(check_cache_view(v).ok());

    std::mt19937_64 rng(13);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> x(d);
    for (float& e : x) e = normal(rng);
    const std::vector<uint8_t> codes_before = codes;
    const std::vector<uint16_t> scales_before = scales;
    const RowScale s = write_cache_row(v, 1, 2, 1, x.data());

    const Quantized alone = round_trip(x, bits);
    EXPECT_EQ(s.scale_fp16, alone.s.scale_fp16);
    EXPECT_EQ(s.min_fp16, alone.s.min_fp16);
    const size_t code_at = size_t((1 * v.code_stride_block + 2 * v.code_stride_slot + 1 * v.code_stride_head) * bits / 8);
    const size_t scale_at = size_t(1 * v.scale_stride_block + 1 * v.scale_stride_head + 2 * v.scale_stride_slot);
    for (size_t b = 0; b < codes.size(); ++b) {
      if (b >= code_at && b < code_at + alone.codes.size()) {
        EXPECT_EQ(codes[b], alone.codes[b - code_at]) << b;
      } else {
        EXPECT_EQ(codes[b], codes_before[b]) << "byte " << b << " outside the row changed";
      }
    }
    for (size_t e = 0; e < scales.size(); ++e) {
      if (e == scale_at) {
        EXPECT_EQ(scales[e], s.scale_fp16);
      } else if (e == scale_at + 1) {
        EXPECT_EQ(scales[e], s.min_fp16);
      } else {
        EXPECT_EQ(scales[e], scales_before[e]) << "scale element " << e << " outside the row changed";
      }
    }
    std::vector<float> y(d);
    read_cache_row(v, 1, 2, 1, y.data());
    EXPECT_EQ(std::memcmp(y.data(), alone.y.data(), sizeof(float) * size_t(d)), 0);

    // Every row of the cache, then every row read back as if quantized alone.
    std::vector<std::vector<float>> all;
    for (int p = 0; p < pages; ++p)
      for (int t = 0; t < page_size; ++t)
        for (int h = 0; h < hkv; ++h) {
          std::vector<float> r(d);
          for (float& e : r) e = normal(rng) * float(1 + p) + float(h);
          write_cache_row(v, p, t, h, r.data());
          all.push_back(r);
        }
    size_t i = 0;
    for (int p = 0; p < pages; ++p)
      for (int t = 0; t < page_size; ++t)
        for (int h = 0; h < hkv; ++h) {
          read_cache_row(v, p, t, h, y.data());
          const Quantized a = round_trip(all[i++], bits);
          ASSERT_EQ(std::memcmp(y.data(), a.y.data(), sizeof(float) * size_t(d)), 0) << p << " " << t << " " << h;
        }
  }
}

TEST(KvQuantCache, ContiguousLayoutMatchesTheRowFunctions) {
  const int batch = 2, capacity = 5, hkv = 3, d = 16, bits = 4;
  // codes [B, capacity, Hkv, D], scales [B, Hkv, capacity, 2], both dense.
  std::vector<uint8_t> codes(size_t(batch * capacity * hkv * d / 2));
  std::vector<uint16_t> scales(size_t(batch * hkv * capacity * 2));
  IntCacheView v;
  v.bits = bits;
  v.head_dim = d;
  v.codes = codes.data();
  v.code_stride_head = d;
  v.code_stride_slot = hkv * d;
  v.code_stride_block = capacity * hkv * d;
  v.scales = scales.data();
  v.scale_stride_slot = 2;
  v.scale_stride_head = capacity * 2;
  v.scale_stride_block = hkv * capacity * 2;
  std::vector<float> x(d);
  for (int i = 0; i < d; ++i) x[size_t(i)] = float(i) - 3.5f;
  write_cache_row(v, 1, 4, 2, x.data());
  const Quantized alone = round_trip(x, bits);
  const size_t row = size_t(((1 * capacity + 4) * hkv + 2) * d / 2);
  EXPECT_EQ(std::memcmp(codes.data() + row, alone.codes.data(), alone.codes.size()), 0);
  const size_t pair = size_t(((1 * hkv + 2) * capacity + 4) * 2);
  EXPECT_EQ(scales[pair], alone.s.scale_fp16);
  EXPECT_EQ(scales[pair + 1], alone.s.min_fp16);
}

TEST(KvQuantCache, RejectsViewsTheFormatCannotAddress) {
  std::vector<uint8_t> codes(64);
  std::vector<uint16_t> scales(16);
  IntCacheView v;
  v.bits = 4;
  v.head_dim = 8;
  v.codes = codes.data();
  v.scales = scales.data();
  v.code_stride_slot = 9;  // a row would start mid-byte
  EXPECT_EQ(check_cache_view(v).argument(), "code_stride_slot");
  const float x[8] = {};
  EXPECT_THROW(write_cache_row(v, 0, 1, 0, x), Error);
  v.bits = 8;
  EXPECT_TRUE(check_cache_view(v).ok());
  v.codes = nullptr;
  EXPECT_EQ(check_cache_view(v).argument(), "codes");
  v.codes = codes.data();
  v.head_dim = 7;
  v.bits = 4;
  v.code_stride_slot = 8;
  EXPECT_EQ(check_cache_view(v).argument(), "head_dim");
}

}  // namespace
}  // namespace splitkv::quant
