// Rotated quantized caches (KvRotation::kHadamard, kernels/common/kv_rotation.hpp): the rotation's
// fixed definition, its orthogonality, what it does to an outlier channel, and attention over a
// rotated cache on the CPU backend against the fp64 reference over the values it stands for.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "kernels/common/kv_rotation.hpp"
#include "quant/kv_quant_host.hpp"
#include "quant/kv_rows.hpp"
#include "splitkv/append_kv.hpp"
#include "splitkv/splitkv.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

std::vector<float> normal_row(int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(d));
  for (float& v : x) v = normal(rng);
  return x;
}

// The definition is part of the stored format: a cache written today must read the same later.
TEST(KvRotation, TheDefinitionIsFixed) {
  const float signs[16] = {-1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, -1};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(detail::kv_rotation_sign(c), signs[c]) << "channel " << c;
  }
  // rotate(e_j) = s_j / sqrt(D) * (column j of the Sylvester Hadamard matrix): its entry i has the
  // sign (-1)^popcount(i & j).
  for (int d : {64, 128, 256}) {
    for (int j : {0, 5, d - 1}) {
      std::vector<float> e(size_t(d), 0.f);
      e[size_t(j)] = 1.f;
      detail::kv_rotate(e.data(), d);
      for (int i = 0; i < d; ++i) {
        const float want = detail::kv_rotation_sign(j) * (__builtin_popcount(unsigned(i & j)) % 2 ? -1.f : 1.f) *
                           detail::kv_rotation_scale(d);
        ASSERT_EQ(e[size_t(i)], want) << "d " << d << " column " << j << " entry " << i;
      }
    }
  }
  EXPECT_EQ(detail::kv_rotation_scale(96), 0.f);  // not a head dim splitkv serves
}

TEST(KvRotation, IsOrthogonal) {
  for (int d : {64, 128, 256}) {
    std::vector<float> q = normal_row(d, 1), k = normal_row(d, 2), k_back = k;
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += double(q[size_t(i)]) * k[size_t(i)];
    detail::kv_rotate(q.data(), d);
    detail::kv_rotate(k_back.data(), d);
    double rotated_dot = 0;
    for (int i = 0; i < d; ++i) rotated_dot += double(q[size_t(i)]) * k_back[size_t(i)];
    EXPECT_NEAR(rotated_dot, dot, 1e-5 * std::sqrt(double(d))) << "d " << d;
    detail::kv_unrotate(k_back.data(), d);
    for (int i = 0; i < d; ++i) ASSERT_NEAR(k_back[size_t(i)], k[size_t(i)], 2e-6f) << "d " << d;
  }
}

// A key with one channel 20x the rest: plain INT4 spends its 16 levels on it; rotated, the row's
// range shrinks and the other channels survive.
TEST(KvRotation, SpreadsAnOutlierChannel) {
  const int d = 128;
  double plain_err = 0, rotated_err = 0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    std::vector<float> x = normal_row(d, 100 + seed);
    x[43] *= 20.f;
    std::vector<uint8_t> codes(size_t(quant::packed_row_bytes(d, 4)));
    std::vector<float> back(static_cast<size_t>(d));
    quant::dequantize_row_int(codes.data(), d, 4, quant::quantize_row_int(x.data(), d, 4, codes.data()), back.data());
    for (int i = 0; i < d; ++i) plain_err += std::pow(double(back[size_t(i)]) - x[size_t(i)], 2);
    std::vector<float> r = x;
    detail::kv_rotate(r.data(), d);
    quant::dequantize_row_int(codes.data(), d, 4, quant::quantize_row_int(r.data(), d, 4, codes.data()), back.data());
    detail::kv_unrotate(back.data(), d);
    for (int i = 0; i < d; ++i) rotated_err += std::pow(double(back[size_t(i)]) - x[size_t(i)], 2);
  }
  EXPECT_LT(rotated_err * 4, plain_err) << "rotated " << rotated_err << ", plain " << plain_err;
}

// The CPU backend over rotated caches in every quantized format matches the fp64 reference over
// the values the cache stands for (rows dequantized, then rotated back).
TEST(KvRotation, CpuBackendMatchesTheReference) {
  for (KvFormat format : {KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    for (int page_size : {0, 16}) {
      const testing::DecodeCaseSpec spec = testing::DecodeSpecBuilder(3, 8, 2, 700)
                                               .format(format)
                                               .rotated()
                                               .paged(page_size)
                                               .queries(4, true)
                                               .lens({700, 0, 133})
                                               .spec;
      PlanOptions o;
      o.num_splits = 3;
      Plan plan;
      ASSERT_TRUE(plan_decode(spec.problem, DeviceInfo::h200(), o, &plan).ok());
      testing::DecodeCase c = testing::make_decode_case(spec);
      ASSERT_TRUE(cpu::run_decode(plan, c.host_tensors()).ok());
      const testing::Comparison cmp = testing::check_decode(c);
      EXPECT_TRUE(cmp.passed) << to_string(format) << " page " << page_size << ": " << cmp.summary();
    }
  }
}

// What a rotated cache's reader returns is the stored row rotated back.
TEST(KvRotation, TheReaderRotatesRowsBack) {
  testing::DecodeCase c =
      testing::make_decode_case(testing::DecodeSpecBuilder(1, 4, 2, 40).format(KvFormat::kInt8).rotated().spec);
  const DecodeTensors t = c.host_tensors();
  const quant::KvRowReader stored(KvFormat::kInt8, false, t.k, t.k_scales, 128);
  const quant::KvRowReader values(KvFormat::kInt8, false, t.k, t.k_scales, 128, KvRotation::kHadamard);
  std::vector<float> a(128), b(128);
  stored.read(0, 5, 1, a.data());
  values.read(0, 5, 1, b.data());
  detail::kv_unrotate(a.data(), 128);
  EXPECT_EQ(a, b);
}

TEST(KvRotation, ValidationAndTheGpuPathsNameIt) {
  DecodeProblem p;
  p.batch = 1;
  p.num_q_heads = p.num_kv_heads = 2;
  p.head_dim = 128;
  p.max_kv_len = 64;
  p.kv_rotation = KvRotation::kHadamard;
  Plan plan;
  Status s = plan_decode(p, DeviceInfo::h200(), {}, &plan);  // a 16-bit cache: nothing to rotate
  EXPECT_EQ(s.argument(), "kv_rotation") << s.message();
  p.kv_format = KvFormat::kInt4;
  p.kv_rotation = static_cast<KvRotation>(7);
  EXPECT_EQ(plan_decode(p, DeviceInfo::h200(), {}, &plan).argument(), "kv_rotation");
  // Planned (the CPU backend runs it); the GPU entry point refuses it by name, before any launch.
  testing::DecodeCase c =
      testing::make_decode_case(testing::DecodeSpecBuilder(1, 2, 2, 64).format(KvFormat::kInt4).rotated().spec);
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  s = run_decode(plan, c.host_tensors(), nullptr, 0, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_EQ(s.argument(), "kv_rotation") << s.message();
  AppendKvProblem a;
  a.num_tokens = 1;
  a.num_kv_heads = 2;
  a.head_dim = 128;
  a.kv_format = KvFormat::kInt8;
  a.kv_rotation = KvRotation::kHadamard;
  s = run_append_kv(a, AppendKvTensors{}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_EQ(s.argument(), "kv_rotation") << s.message();
}

}  // namespace
}  // namespace splitkv
