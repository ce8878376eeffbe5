// The fp64 reference: direct softmax, split partials + combine, and two-pass agree; edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/host_tensor.hpp"
#include "fp64_agreement.hpp"
#include "kernels/common/causal_mask.hpp"
#include "reference/reference.hpp"
#include "testing/decode_case.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv {
namespace {

void expect_methods_agree(const ref::Result& direct, const ref::Result& other, const char* what) {
  testing::expect_results_agree(direct, other, what);
}

testing::DecodeCaseSpec decode_spec(int batch, int hq, int hkv, int d, int q_len, int max_len, int page_size,
                                    bool causal, std::vector<int> lens, uint64_t seed, float q_scale = 1.f) {
  testing::DecodeCaseSpec s = testing::DecodeSpecBuilder(batch, hq, hkv, max_len)
                                  .head_dim(d)
                                  .queries(q_len, causal)
                                  .paged(page_size)
                                  .lens(std::move(lens))
                                  .spec;
  s.seed = seed;
  s.q_scale = q_scale;
  return s;
}

struct DecodeShape {
  int batch, hq, hkv, d, q_len, max_len, page_size;
  bool causal;
  std::vector<int> lens;
};

class ReferenceDecodeAgreement : public ::testing::TestWithParam<DecodeShape> {};

TEST_P(ReferenceDecodeAgreement, DirectSplitAndTwoPassAgree) {
  const DecodeShape& s = GetParam();
  for (float q_scale : {1.f, 8.f}) {  // flat and peaked softmax
    testing::DecodeCase c = testing::make_decode_case(
        decode_spec(s.batch, s.hq, s.hkv, s.d, s.q_len, s.max_len, s.page_size, s.causal, s.lens, 11, q_scale));
    const DecodeTensors t = c.host_tensors();
    const ref::Result direct = ref::decode(c.problem, t);
    for (int splits : {1, 2, 3, 7}) {
      ref::Options o{ref::Method::kSplit, splits, 0, 64};
      expect_methods_agree(direct, ref::decode(c.problem, t, o), "split");
    }
    expect_methods_agree(direct, ref::decode(c.problem, t, ref::Options{ref::Method::kSplit, 1, 128, 64}),
                         "fixed split");
    expect_methods_agree(direct, ref::decode(c.problem, t, ref::Options{ref::Method::kTwoPass}), "two-pass");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceDecodeAgreement,
    ::testing::Values(DecodeShape{2, 4, 2, 64, 1, 300, 0, false, {300, 17}},
                      DecodeShape{3, 8, 2, 64, 4, 257, 16, true, {0, 257, 63}},
                      DecodeShape{1, 6, 1, 128, 3, 1000, 64, true, {}},
                      DecodeShape{2, 4, 4, 64, 1, 65, 32, false, {65, 1}}));

TEST(ReferenceEdgeCases, ZeroLengthGivesZerosAndNegativeInfinity) {
  testing::DecodeCase c = testing::make_decode_case(decode_spec(2, 4, 2, 64, 2, 40, 0, false, {0, 40}, 3));
  const ref::Result r = ref::decode(c.problem, c.host_tensors());
  const int hq = 4, lq = 2, d = 64;
  for (int h = 0; h < hq; ++h) {
    for (int i = 0; i < lq; ++i) {
      EXPECT_EQ(r.lse[(0 * hq + h) * lq + i], -std::numeric_limits<double>::infinity());
      for (int j = 0; j < d; ++j) EXPECT_EQ(r.out[((0 * lq + i) * hq + h) * d + j], 0.0);
      EXPECT_TRUE(std::isfinite(r.lse[(1 * hq + h) * lq + i]));
    }
  }
}

TEST(ReferenceEdgeCases, OneKeyReturnsItsValue) {
  testing::DecodeCase c = testing::make_decode_case(decode_spec(1, 2, 1, 64, 1, 1, 0, false, {1}, 5));
  const DecodeTensors t = c.host_tensors();
  const ref::Result r = ref::decode(c.problem, t);
  for (int h = 0; h < 2; ++h) {
    double score = 0;
    for (int j = 0; j < 64; ++j) {
      EXPECT_NEAR(r.out[h * 64 + j], detail::load_float(t.v, detail::element_offset(t.v, 0, 0, 0, j)), 1e-15);
      score += double(detail::load_float(t.q, detail::element_offset(t.q, 0, 0, h, j))) *
               detail::load_float(t.k, detail::element_offset(t.k, 0, 0, 0, j));
    }
    EXPECT_NEAR(r.lse[h], score / 8.0, 1e-12);  // scale 1/sqrt(64); log(1) = 0
  }
}

TEST(ReferenceEdgeCases, HugeAndTinyScoresStayFinite) {
  // q scaled by 300: scores of order +-1e4, far past exp's range without max subtraction.
  testing::DecodeCase c = testing::make_decode_case(decode_spec(2, 2, 1, 64, 1, 200, 0, false, {}, 9, 300.f));
  const DecodeTensors t = c.host_tensors();
  const ref::Result direct = ref::decode(c.problem, t);
  for (double x : direct.out) ASSERT_TRUE(std::isfinite(x));
  for (double x : direct.lse) ASSERT_TRUE(std::isfinite(x));
  expect_methods_agree(direct, ref::decode(c.problem, t, ref::Options{ref::Method::kSplit, 5, 0, 64}), "split");
  expect_methods_agree(direct, ref::decode(c.problem, t, ref::Options{ref::Method::kTwoPass}), "two-pass");
}

testing::PrefillCaseSpec prefill_spec(int batch, int hq, int hkv, int lq, int lk, bool causal, bool varlen,
                                      std::vector<int> q_lens = {}, std::vector<int> kv_lens = {}) {
  testing::PrefillCaseSpec s;
  s.problem.batch = batch;
  s.problem.num_q_heads = hq;
  s.problem.num_kv_heads = hkv;
  s.problem.head_dim = 64;
  s.problem.max_q_len = lq;
  s.problem.max_kv_len = lk;
  s.problem.causal = causal;
  s.problem.varlen = varlen;
  s.q_lens = std::move(q_lens);
  s.kv_lens = std::move(kv_lens);
  return s;
}

TEST(ReferencePrefill, MethodsAgreeOnCausalAndVarlen) {
  for (const testing::PrefillCaseSpec& spec :
       {prefill_spec(2, 4, 2, 33, 70, true, false), prefill_spec(1, 2, 2, 40, 17, true, false),
        prefill_spec(3, 4, 1, 50, 90, true, true, {50, 0, 7}, {90, 12, 3})}) {
    testing::PrefillCase c = testing::make_prefill_case(spec);
    const PrefillTensors t = c.host_tensors();
    const ref::Result direct = ref::prefill(c.problem, t);
    expect_methods_agree(direct, ref::prefill(c.problem, t, ref::Options{ref::Method::kSplit, 3, 0, 16}), "split");
    expect_methods_agree(direct, ref::prefill(c.problem, t, ref::Options{ref::Method::kTwoPass}), "two-pass");
  }
}

TEST(ReferencePrefill, CausalRowsThatSeeNoKeyAreEmpty) {
  // Lq = 40 > Lk = 17, bottom-right aligned: queries 0..22 see no key.
  testing::PrefillCase c = testing::make_prefill_case(prefill_spec(1, 1, 1, 40, 17, true, false));
  const ref::Result r = ref::prefill(c.problem, c.host_tensors());
  for (int i = 0; i < 40; ++i) {
    const bool sees_keys = i >= 40 - 17;
    EXPECT_EQ(std::isinf(r.lse[i]), !sees_keys) << i;
    if (!sees_keys) {
      for (int j = 0; j < 64; ++j) EXPECT_EQ(r.out[i * 64 + j], 0.0);
    }
  }
  EXPECT_EQ(detail::visible_key_end(true, 40, 17, 22), 0);
  EXPECT_EQ(detail::visible_key_end(true, 40, 17, 23), 1);
  EXPECT_EQ(detail::visible_key_end(true, 40, 17, 39), 17);
}

}  // namespace
}  // namespace splitkv
