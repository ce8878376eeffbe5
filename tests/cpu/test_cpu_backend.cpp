// The CPU backend runs the split-KV algorithm (partials + ordered combine) and must match the
// fp64 reference by the same rule the GPU kernels meet.
#include <gtest/gtest.h>

#include <algorithm>

#include "cpu/cpu_backend.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

struct CpuCase {
  int batch, hq, hkv, d, q_len, max_len, page_size, splits;
  bool causal;
  std::vector<int> lens;
};

class CpuBackend : public ::testing::TestWithParam<CpuCase> {};

TEST_P(CpuBackend, MatchesReference) {
  const CpuCase& k = GetParam();
  testing::DecodeCaseSpec spec = testing::DecodeSpecBuilder(k.batch, k.hq, k.hkv, k.max_len)
                                     .head_dim(k.d)
                                     .queries(k.q_len, k.causal)
                                     .paged(k.page_size)
                                     .lens(k.lens)
                                     .strided()
                                     .spec;
  PlanOptions o;
  o.num_splits = k.splits;
  Plan plan;
  ASSERT_TRUE(plan_decode(spec.problem, DeviceInfo::h200(), o, &plan).ok());
  for (float q_scale : {1.f, 6.f}) {
    spec.q_scale = q_scale;
    testing::DecodeCase c = testing::make_decode_case(spec);
    ASSERT_TRUE(cpu::run_decode(plan, c.host_tensors()).ok());
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << cmp.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuBackend,
                         ::testing::Values(CpuCase{2, 8, 2, 64, 1, 300, 0, 3, false, {300, 0}},
                                           CpuCase{1, 4, 4, 128, 4, 257, 16, 0, true, {}},
                                           CpuCase{3, 4, 1, 64, 2, 1000, 64, 5, true, {1, 1000, 17}}));

TEST(CpuBackendInvariance, BatchInvariantSplitsGiveTheSameBits) {
  // Sequence 0 alone and beside a longer sequence: with a fixed split size its bits match.
  auto make = [](std::vector<int> lens) {
    const int longest = *std::max_element(lens.begin(), lens.end());
    return testing::make_decode_case(
        testing::DecodeSpecBuilder(static_cast<int>(lens.size()), 4, 2, longest).head_dim(64).lens(lens).spec);
  };
  testing::DecodeCase alone = make({700}), paired = make({700, 3000});
  testing::copy_sequence(alone, 0, paired, 0);
  std::vector<uint16_t> bits[2];
  int i = 0;
  for (testing::DecodeCase* c : {&alone, &paired}) {
    PlanOptions o;
    o.split_tokens = 128;
    Plan plan;
    ASSERT_TRUE(plan_decode(c->problem, DeviceInfo::h200(), o, &plan).ok());
    ASSERT_TRUE(cpu::run_decode(plan, c->host_tensors()).ok());
    bits[i++] = testing::sequence_output_bits(*c, 0);
  }
  EXPECT_EQ(bits[0], bits[1]);
}

// A decode plan served by chunked prefill (a prefill family named) is still a decode plan: the CPU
// backend runs it (its splits and KV block) and matches the reference.
TEST(CpuBackendPlans, DecodeServedByChunkedPrefillRunsOnTheCpu) {
  const testing::DecodeCaseSpec spec =
      testing::DecodeSpecBuilder(3, 28, 4, 700).queries(8, true).paged(16).lens({700, 5, 0}).spec;
  PlanOptions o;
  o.family = "prefill_sm90_gqa64";
  o.num_splits = 3;
  Plan plan;
  ASSERT_TRUE(plan_decode(spec.problem, DeviceInfo::h200(), o, &plan).ok());
  ASSERT_TRUE(plan.decode_via_prefill());
  testing::DecodeCase c = testing::make_decode_case(spec);
  ASSERT_TRUE(cpu::run_decode(plan, c.host_tensors()).ok());
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << cmp.summary();
}

// A head-major cache ([slabs, Hkv, tokens, D] in memory, FlashInfer's HND) is the token-major one
// with other strides: the same values give the same bits, in every KV format, paged or not, with
// the head dimension padded (strided) or not.
TEST(CpuBackendLayouts, HeadMajorCachesGiveTheTokenMajorBits) {
  for (KvFormat format : {KvFormat::kNative, KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    for (int page_size : {0, 16}) {
      testing::DecodeCaseSpec spec = testing::DecodeSpecBuilder(3, 8, 2, 333)
                                         .head_dim(64)
                                         .queries(2, true)
                                         .paged(page_size)
                                         .format(format)
                                         .lens({333, 0, 40})
                                         .strided(page_size == 0)
                                         .spec;
      PlanOptions o;
      o.num_splits = 3;
      Plan plan;
      ASSERT_TRUE(plan_decode(spec.problem, DeviceInfo::h200(), o, &plan).ok());
      testing::DecodeCase token_major = testing::make_decode_case(spec);
      spec.head_major_kv = true;
      testing::DecodeCase head_major = testing::make_decode_case(spec);
      ASSERT_EQ(head_major.k_ref.stride[1], 64);  // consecutive tokens of a head are adjacent rows
      for (testing::DecodeCase* c : {&token_major, &head_major}) {
        ASSERT_TRUE(cpu::run_decode(plan, c->host_tensors()).ok());
        const testing::Comparison cmp = testing::check_decode(*c);
        EXPECT_TRUE(cmp.passed) << to_string(format) << " page " << page_size << ": " << cmp.summary();
      }
      EXPECT_EQ(token_major.out, head_major.out) << to_string(format) << " page " << page_size;
    }
  }
}

}  // namespace
}  // namespace splitkv
