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
  testing::DecodeCaseSpec spec;
  spec.problem.batch = k.batch;
  spec.problem.num_q_heads = k.hq;
  spec.problem.num_kv_heads = k.hkv;
  spec.problem.head_dim = k.d;
  spec.problem.q_len = k.q_len;
  spec.problem.max_kv_len = k.max_len;
  spec.problem.page_size = k.page_size;
  spec.problem.causal = k.causal;
  spec.seq_lens = k.lens;
  spec.strided = true;
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
    testing::DecodeCaseSpec spec;
    spec.problem.batch = static_cast<int>(lens.size());
    spec.problem.num_q_heads = 4;
    spec.problem.num_kv_heads = 2;
    spec.problem.head_dim = 64;
    spec.problem.max_kv_len = *std::max_element(lens.begin(), lens.end());
    spec.seq_lens = lens;
    return testing::make_decode_case(spec);
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
  testing::DecodeCaseSpec spec;
  spec.problem.batch = 3;
  spec.problem.num_q_heads = 28;
  spec.problem.num_kv_heads = 4;
  spec.problem.head_dim = 128;
  spec.problem.q_len = 8;
  spec.problem.causal = true;
  spec.problem.max_kv_len = 700;
  spec.problem.page_size = 16;
  spec.seq_lens = {700, 5, 0};
  PlanOptions o;
  o.family = "prefill_sm90_gqa64";
  o.num_splits = 3;
  Plan plan;
  ASSERT_TRUE(plan_decode(spec.problem, DeviceInfo::h200(), o, &plan).ok());
  ASSERT_TRUE(plan.decode_via_prefill);
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
      testing::DecodeCaseSpec spec;
      spec.problem.batch = 3;
      spec.problem.num_q_heads = 8;
      spec.problem.num_kv_heads = 2;
      spec.problem.head_dim = 64;
      spec.problem.q_len = 2;
      spec.problem.causal = true;
      spec.problem.max_kv_len = 333;
      spec.problem.page_size = page_size;
      spec.problem.kv_format = format;
      spec.seq_lens = {333, 0, 40};
      spec.strided = page_size == 0;
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
