// Attention sinks on the GPU (docs/VARIANTS.md): every decode family writes its partials and the
// combine kernel folds each head's sink once into the merged row; run_combine folds the caller's
// sinks the same way. Checked against the fp64 reference (which includes the sink in O's
// denominator and in the LSE), outputs and workspace poisoned: the 16-bit and quantized families
// of 8, 16 and 32 packed rows, one split and many, batch-invariant splits, paged caches, sequences
// of no key (O = 0, LSE = the sink), sinks of -inf (no sink) and very large ones; a cluster's merge
// folds them on sm_90 (16-bit and quantized, the gpt-oss shape with its window).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;
using testing::DeviceDecodeCase;

struct SinkCase {
  std::string name;
  testing::DecodeCaseSpec spec;
  int num_splits = 0;
  int split_tokens = 0;
  float sink_value = std::numeric_limits<float>::quiet_NaN();  // NaN: the case's random sinks
  Merge merge = Merge::kAuto;
};

testing::DecodeCaseSpec sunk(testing::DecodeSpecBuilder b) {
  b.spec.problem.sinks = true;
  return b.spec;
}

std::vector<SinkCase> sink_cases() {
  using B = testing::DecodeSpecBuilder;
  std::vector<SinkCase> c;
  c.push_back({"n8_one_split", sunk(B(2, 32, 8, 300).lens({300, 0}))});
  c.push_back({"n8_forced_splits", sunk(B(2, 32, 8, 5000).lens({5000, 17})), 7});
  c.push_back({"n8_batch_invariant", sunk(B(3, 32, 8, 5000).lens({5000, 64, 0})), 0, 512});
  c.push_back({"m16_q4_causal_paged16", sunk(B(2, 32, 8, 2000).queries(4, true).paged(16).lens({2000, 9}))});
  c.push_back({"m32_q8_causal", sunk(B(2, 32, 8, 3000).queries(8, true).lens({3000, 100})), 3});
  c.push_back({"gpt_oss_shape_d64", sunk(B(4, 64, 8, 4096).head_dim(64).lens({4096, 128, 1, 0}))});
  c.push_back({"int4_n8", sunk(B(2, 32, 8, 3000).format(KvFormat::kInt4).lens({3000, 5})), 4});
  c.push_back({"fp8_q4_causal", sunk(B(2, 32, 8, 3000).format(KvFormat::kFP8E4M3).queries(4, true).lens({3000, 70}))});
  c.push_back({"int8_kc_decode_kernel", sunk(B(2, 32, 8, 1000).format(KvFormat::kInt8Kc).lens({1000, 65}))});
  c.push_back({"sink_minus_inf", sunk(B(2, 32, 8, 700).lens({700, 0})), 3, 0, -std::numeric_limits<float>::infinity()});
  c.push_back({"sink_huge", sunk(B(2, 32, 8, 700).lens({700, 0})), 3, 0, 80.f});
  // One split: the decode kernel folds the sink into its final rows (no combine launch), in every
  // family: 16-bit tiles of 8 and 32 rows, quantized, the *_kc kernel, the gpt-oss shape.
  c.push_back({"one_split_sink_minus_inf", sunk(B(2, 32, 8, 700).lens({700, 0})), 1, 0,
               -std::numeric_limits<float>::infinity()});
  c.push_back({"one_split_sink_huge", sunk(B(2, 32, 8, 700).lens({700, 0})), 1, 0, 80.f});
  c.push_back({"one_split_m32_q8_causal", sunk(B(2, 32, 8, 1000).queries(8, true).lens({1000, 100})), 1});
  c.push_back({"one_split_int4_n8", sunk(B(2, 32, 8, 3000).format(KvFormat::kInt4).lens({3000, 5})), 1});
  c.push_back({"one_split_fp8_q4_causal",
               sunk(B(2, 32, 8, 1500).format(KvFormat::kFP8E4M3).queries(4, true).lens({1500, 70})), 1});
  c.push_back({"one_split_int8_kc_decode_kernel", sunk(B(2, 32, 8, 1000).format(KvFormat::kInt8Kc).lens({1000, 65})),
               1});
  c.push_back({"one_split_gpt_oss_d64_q4", sunk(B(64, 64, 8, 600).head_dim(64).queries(4, true)), 0});
  // A cluster's merge folds the sink into the merged rows (sm_90).
  const float random = std::numeric_limits<float>::quiet_NaN();
  c.push_back({"cluster8_n8", sunk(B(1, 32, 8, 8000)), 8, 0, random, Merge::kCluster});
  c.push_back({"cluster4_m16_q4_causal_empty_row", sunk(B(2, 32, 8, 3000).queries(4, true).lens({3000, 0})), 4, 0, random,
               Merge::kCluster});
  c.push_back({"cluster2_sink_huge", sunk(B(1, 32, 8, 2000)), 2, 0, 80.f, Merge::kCluster});
  c.push_back({"cluster8_int4", sunk(B(1, 32, 8, 6000).format(KvFormat::kInt4)), 8, 0, random, Merge::kCluster});
  c.push_back({"cluster8_fp8_q4_causal",
               sunk(B(1, 32, 8, 6000).format(KvFormat::kFP8E4M3).queries(4, true)), 8, 0, random, Merge::kCluster});
  {
    testing::DecodeCaseSpec gpt_oss = sunk(B(1, 64, 8, 8192).head_dim(64).queries(4, true));
    gpt_oss.problem.window_left = 128;
    gpt_oss.problem.window_right = 0;
    c.push_back({"cluster4_gpt_oss_d64_q4_window128", gpt_oss, 4, 0, random, Merge::kCluster});
  }
  return c;
}

class SinksVsReference : public ::testing::TestWithParam<SinkCase> {};

TEST_P(SinksVsReference, MatchesFp64Reference) {
  const SinkCase& k = GetParam();
  SPLITKV_REQUIRE_GPU(k.spec.problem.dtype, k.spec.problem.head_dim);
  testing::DecodeCase c = testing::make_decode_case(k.spec);
  if (!std::isnan(k.sink_value)) std::fill(c.sinks.begin(), c.sinks.end(), k.sink_value);
  PlanOptions o;
  o.num_splits = k.num_splits;
  o.split_tokens = k.split_tokens;
  o.merge = k.merge;
  if (k.spec.problem.kv_format == KvFormat::kInt8Kc) o.family = "decode_kc_n8";
  Plan plan;
  const Status planned = plan_decode(c.problem, gpu_test::device(), o, &plan);
  if (k.merge == Merge::kCluster && gpu_test::device().cc_major < 9) GTEST_SKIP() << "cluster merges need sm_90";
  ASSERT_TRUE(planned.ok()) << planned.message();
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build";
  if (k.merge == Merge::kCluster) ASSERT_TRUE(plan.cluster_combine()) << describe(plan);
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  const Status ran = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  ASSERT_TRUE(ran.ok()) << ran.message();
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << k.name << " (" << plan.family() << ", " << plan.num_splits() << " splits): " << cmp.summary();
}

INSTANTIATE_TEST_SUITE_P(Cases, SinksVsReference, ::testing::ValuesIn(sink_cases()),
                         [](const ::testing::TestParamInfo<SinkCase>& info) { return info.param.name; });

// run_combine with sinks over the caller's partials equals one decode call with them: the partials
// of a sinkless call (partial_o) merged with the sinks.
// A sequence's bits do not depend on its batch with sinks either: alone it is one split whose kernel
// folds the sink; beside a long sequence its splits merge in the combine kernel, which folds it.
TEST(SinksGpu, OneSplitAndTheCombineFoldTheSameBits) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  using B = testing::DecodeSpecBuilder;
  PlanOptions o;
  o.split_tokens = 256;
  testing::DecodeCase alone = testing::make_decode_case(sunk(B(1, 32, 8, 200)));
  testing::DecodeCase batch = testing::make_decode_case(sunk(B(3, 32, 8, 5000).lens({5000, 200, 7})));
  batch.sinks = alone.sinks;  // one model: the same sink per head
  Plan one, many;
  ASSERT_TRUE(plan_decode(alone.problem, gpu_test::device(), o, &one).ok());
  ASSERT_TRUE(plan_decode(batch.problem, gpu_test::device(), o, &many).ok());
  ASSERT_EQ(one.num_splits(), 1);
  ASSERT_EQ(one.workspace_bytes(), 0u);
  ASSERT_GT(many.num_splits(), 1);
  if (!gpu_test::check_batch_invariant_bits(alone, batch, 1, o, "sinks")) GTEST_SKIP() << "not compiled into this build";
}

TEST(SinksGpu, RunCombineFoldsTheCallersSinks) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(3, 32, 8, 4000).lens({4000, 33, 0});
  testing::DecodeCase with_sinks = testing::make_decode_case(sunk(b));
  testing::DecodeCase plain = with_sinks;  // the same inputs
  plain.problem.sinks = false;
  PlanOptions o;
  o.num_splits = 5;
  Plan plan;
  ASSERT_TRUE(plan_decode(plain.problem, gpu_test::device(), o, &plan).ok());
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build";
  const int64_t rows = int64_t(3) * 32;  // B x q_len x Hq
  ASSERT_GT(plan.num_splits(), 1);
  DeviceDecodeCase dev(plain);
  DeviceBuffer po(size_t(plan.num_splits()) * rows * 128 * sizeof(float)), pl(size_t(plan.num_splits()) * rows * sizeof(float));
  DecodeTensors t = dev.tensors;
  t.out = TensorRef{};
  t.lse = TensorRef{};
  t.partial_o = TensorRef::contiguous(po.get(), DType::kF32, {plan.num_splits(), 3, 32, 128});
  t.partial_lse = TensorRef::contiguous(pl.get(), DType::kF32, {plan.num_splits(), 3, 32});
  const Status shard = run_decode(plan, t, nullptr, 0, nullptr);
  ASSERT_TRUE(shard.ok()) << shard.message();
  CombineProblem cp;
  cp.num_splits = plan.num_splits(), cp.batch = 3, cp.seq_len = 1, cp.num_heads = 32, cp.head_dim = 128;
  cp.dtype = DType::kBF16;
  cp.sinks = true;
  DeviceBuffer sinks = DeviceBuffer::from(with_sinks.sinks);
  testing::poison_outputs(with_sinks);
  DeviceDecodeCase out(with_sinks);  // its out / lse buffers receive the merge
  CombineTensors ct;
  ct.partial_o = TensorRef::contiguous(po.get(), DType::kF32, {plan.num_splits(), 3, 32, 128});
  ct.partial_lse = TensorRef::contiguous(pl.get(), DType::kF32, {plan.num_splits(), 3, 32});
  ct.out = out.tensors.out;
  ct.lse = out.tensors.lse;
  ct.sinks = TensorRef::contiguous(sinks.get(), DType::kF32, {32});
  const Status merged = run_combine(cp, ct, nullptr);
  ASSERT_TRUE(merged.ok()) << merged.message();
  out.download_outputs(with_sinks);
  const testing::Comparison cmp = testing::check_decode(with_sinks);
  EXPECT_TRUE(cmp.passed) << cmp.summary();
}

}  // namespace
}  // namespace splitkv
