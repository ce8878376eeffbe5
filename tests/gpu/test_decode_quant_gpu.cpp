// Decode over quantized KV caches (family decode_quant) against the fp64 reference attending over
// the dequantized cache, under the bf16 tolerances (docs/BENCHMARKING.md): every format, paged and
// contiguous, GQA packing, q_len 1..16 causal, planned/forced splits, batch-invariant splits, the
// cluster combine, NaN in unused cache slots, zero lengths, determinism and graph replay.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;
using testing::DeviceDecodeCase;

constexpr KvFormat kFormats[] = {KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4};

struct QuantCase {
  std::string name;
  testing::DecodeCaseSpec spec;
  int num_splits = 0;  // 0: planner
  int split_tokens = 0;
  bool cluster_combine = false;
  std::string family;  // empty: the planner's (decode_quant_n8 for <= 8 packed rows, else decode_quant)
  bool l2_prefetch = true;
  int l2_prefetch_keys = -1;  // -1: the planner's rule
};

testing::DecodeCaseSpec spec(KvFormat format, int batch, int hq, int hkv, int max_len, std::vector<int> lens = {}) {
  return testing::DecodeSpecBuilder(batch, hq, hkv, max_len).format(format).lens(std::move(lens)).spec;
}

// Plans and runs one case with NaN-poisoned outputs and workspace; false when this build lacks it.
bool run(const QuantCase& k, testing::DecodeCase* c) {
  *c = testing::make_decode_case(k.spec);
  PlanOptions o;
  o.num_splits = k.num_splits;
  o.split_tokens = k.split_tokens;
  if (k.cluster_combine) o.merge = Merge::kCluster;
  o.family = k.family;
  o.tuning.l2_prefetch = k.l2_prefetch;
  o.tuning.l2_prefetch_keys = k.l2_prefetch_keys;
  Plan plan;
  const Status planned = plan_decode(c->problem, gpu_test::device(), o, &plan);
  EXPECT_TRUE(planned.ok()) << planned.message();
  const int rows = c->problem.q_len * (c->problem.num_q_heads / c->problem.num_kv_heads);
  EXPECT_EQ(plan.family(), !k.family.empty() ? k.family : rows <= 8 ? "decode_quant_n8" : "decode_quant") << k.name;
  if (!gpu_test::plan_compiled(plan)) return false;
  DeviceDecodeCase dev(*c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  const Status ran = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  EXPECT_TRUE(ran.ok()) << ran.message();
  dev.download_outputs(*c);
  return true;
}

#define SPLITKV_RUN_OR_SKIP(k, c)                                                                  \
  do {                                                                                             \
    if (!run(k, c)) GTEST_SKIP() << "not compiled into this build: " << to_string((k).spec.problem.kv_format); \
  } while (0)

class QuantDecodeVsReference : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantDecodeVsReference, MatchesFp64ReferenceOverTheDequantizedCache) {
  const QuantCase& k = GetParam();
  SPLITKV_REQUIRE_GPU(k.spec.problem.dtype, k.spec.problem.head_dim);
  for (float q_scale : {1.f, 8.f}) {  // flat and peaked softmax
    QuantCase scaled = k;
    scaled.spec.q_scale = q_scale;
    testing::DecodeCase c;
    SPLITKV_RUN_OR_SKIP(scaled, &c);
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << k.name << " q_scale=" << q_scale << ": " << cmp.summary();
  }
}

std::vector<QuantCase> quant_cases() {
  std::vector<QuantCase> cases;
  for (KvFormat f : kFormats) {
    const std::string fmt = to_string(f);
    auto add = [&](std::string name, testing::DecodeCaseSpec s, int splits = 0, int split_tokens = 0,
                   bool cluster = false) {
      cases.push_back(QuantCase{fmt + "_" + name, std::move(s), splits, split_tokens, cluster});
    };
    for (int len : {1, 17, 1000, 4097}) add("len" + std::to_string(len), spec(f, 1, 32, 8, len));
    add("mixed_lengths_with_zero", spec(f, 4, 32, 8, 3000, {0, 3000, 1, 333}));
    add("gqa_28_4", spec(f, 2, 28, 4, 1500));
    add("mqa_8_1", spec(f, 3, 8, 1, 2000, {2000, 5, 1234}));
    add("mha_16_16", spec(f, 1, 16, 16, 700));
    testing::DecodeCaseSpec paged16 = spec(f, 3, 32, 8, 3000, {3000, 17, 0});
    paged16.problem.page_size = 16;
    add("paged16_shuffled", paged16);
    testing::DecodeCaseSpec paged256 = spec(f, 2, 32, 8, 5000, {4097, 5000});
    paged256.problem.page_size = 256;
    add("paged256_shuffled", paged256);
    for (int q_len : {2, 5, 16}) {
      testing::DecodeCaseSpec s = spec(f, 2, 32, 8, 1000, {1000, 3});
      s.problem.q_len = q_len;
      s.problem.causal = true;
      if (q_len == 16) s.problem.page_size = 16;
      add("q" + std::to_string(q_len) + "_causal", s);
    }
    testing::DecodeCaseSpec strided = spec(f, 2, 32, 8, 1000);
    strided.strided = true;
    add("strided", strided);
    testing::DecodeCaseSpec head_major = spec(f, 2, 32, 8, 3000, {3000, 65});  // [slabs, Hkv, tokens, D]
    head_major.head_major_kv = true;
    add("head_major_splits", head_major, 5);
    testing::DecodeCaseSpec head_major_paged = spec(f, 2, 16, 2, 700, {700, 33});
    head_major_paged.problem.page_size = 16;
    head_major_paged.head_major_kv = true;
    add("head_major_paged16", head_major_paged);
    testing::DecodeCaseSpec fp16 = spec(f, 2, 32, 8, 2000, {2000, 77});
    fp16.problem.dtype = DType::kF16;
    add("fp16", fp16);
    for (int d : {64, 256}) {
      testing::DecodeCaseSpec s = spec(f, 2, 16, 4, 1500, {1500, 31});
      s.problem.head_dim = d;
      s.problem.page_size = d == 64 ? 16 : 0;
      add("hd" + std::to_string(d), s);
    }
    add("forced_many_splits", spec(f, 2, 32, 8, 4097, {4097, 100}), 24);
    add("batch_invariant_split", spec(f, 3, 32, 8, 5000, {5000, 64, 0}), 0, 512);
    testing::DecodeCaseSpec cluster = spec(f, 2, 28, 4, 5000, {5000, 0});
    cluster.problem.q_len = 2;
    cluster.problem.causal = true;
    add("cluster_16_splits", cluster, 16, 0, true);
    add("combine_kernel_16_splits", cluster, 16);
  }
  // The 16-row family by name where the planner takes the keys-as-rows one (<= 8 packed rows).
  for (KvFormat f : kFormats) {
    const std::string fmt = to_string(f);
    testing::DecodeCaseSpec paged = spec(f, 3, 32, 8, 3000, {3000, 17, 0});
    paged.problem.page_size = 16;
    cases.push_back(QuantCase{fmt + "_m16_paged16", paged, 0, 0, false, "decode_quant"});
    cases.push_back(QuantCase{fmt + "_m16_forced_splits", spec(f, 2, 28, 4, 4097, {4097, 100}), 24, 0, false,
                              "decode_quant"});
  }
  // One long row per format family of code widths.
  cases.push_back(QuantCase{"int4_len65537", spec(KvFormat::kInt4, 1, 8, 2, 65537)});
  cases.push_back(QuantCase{"fp8_len65537", spec(KvFormat::kFP8E4M3, 1, 8, 2, 65537)});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, QuantDecodeVsReference, ::testing::ValuesIn(quant_cases()),
                         [](const ::testing::TestParamInfo<QuantCase>& info) { return info.param.name; });

TEST(QuantDecodeGpu, SplitResultsAreBitwiseDeterministic) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (KvFormat f : kFormats) {
    for (bool cluster : {false, true}) {
      const QuantCase k{"det", spec(f, 2, 32, 8, 8000), 12, 0, cluster};
      testing::DecodeCase first, second;
      SPLITKV_RUN_OR_SKIP(k, &first);
      SPLITKV_RUN_OR_SKIP(k, &second);
      EXPECT_EQ(first.out, second.out) << to_string(f) << " cluster " << cluster;
      EXPECT_EQ(std::memcmp(first.lse.data(), second.lse.data(), first.lse.size() * sizeof(float)), 0)
          << to_string(f) << " cluster " << cluster;
    }
  }
}

TEST(QuantDecodeGpu, L2PrefetchBeforeTheWaitChangesNoBits) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // As for the 16-bit cache (test_decode_gpu.cpp): codes and per-token scales prefetched or not,
  // the same bits, on both quantized families, paged (shuffled, NaN in unused slots) and contiguous.
  for (KvFormat f : kFormats) {
    for (QuantCase k : {QuantCase{"n8_paged16", testing::DecodeSpecBuilder(3, 32, 8, 3000).format(f).paged(16).lens({3000, 17, 0}).spec},
                        QuantCase{"m16_q4_causal", testing::DecodeSpecBuilder(2, 32, 8, 1000).format(f).queries(4, true).lens({1000, 3}).spec, 5},
                        QuantCase{"n8_short", spec(f, 1, 32, 8, 1000)}}) {
      k.l2_prefetch = false;
      k.l2_prefetch_keys = 0;
      testing::DecodeCase without;
      SPLITKV_RUN_OR_SKIP(k, &without);
      EXPECT_TRUE(testing::check_decode(without).passed) << to_string(f) << " " << k.name;
      k.l2_prefetch = true;
      for (int keys : {0, -1, k.spec.problem.max_kv_len}) {  // off, the planner's rule, every key
        k.l2_prefetch_keys = keys;
        testing::DecodeCase with;
        SPLITKV_RUN_OR_SKIP(k, &with);
        EXPECT_TRUE(testing::check_decode(with).passed) << to_string(f) << " " << k.name << " keys " << keys;
        EXPECT_EQ(with.out, without.out) << to_string(f) << " " << k.name << " keys " << keys;
        EXPECT_EQ(std::memcmp(with.lse.data(), without.lse.data(), with.lse.size() * sizeof(float)), 0)
            << to_string(f) << " " << k.name << " keys " << keys;
      }
    }
  }
}

TEST(QuantDecodeGpu, BatchInvariantModeGivesTheSameBitsWhateverTheBatch) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (KvFormat f : {KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {  // FP8's per-head scale is per case
    PlanOptions o;
    o.split_tokens = 1024;
    if (!gpu_test::check_batch_invariant_bits(testing::make_decode_case(spec(f, 1, 32, 8, 3000)),
                                              testing::make_decode_case(spec(f, 3, 32, 8, 20000, {20000, 3000, 7})), 1,
                                              o, to_string(f))) {
      GTEST_SKIP() << "not compiled into this build: " << to_string(f);
    }
  }
}

TEST(QuantDecodeGpu, CudaGraphReplayServesNewLengths) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (KvFormat f : kFormats) {
    testing::DecodeCaseSpec s = spec(f, 3, 32, 8, 8192);
    s.problem.page_size = 16;
    testing::DecodeCase c = testing::make_decode_case(s);
    Plan plan;
    PlanOptions o;
    o.max_splits = 16;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
    if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << to_string(f);
    DeviceDecodeCase dev(c);
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    const gpu_test::CapturedCall graph(
        [&](cudaStream_t stream) { return run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), stream); });
    ASSERT_TRUE(graph.ok()) << graph.error();
    for (const std::vector<int32_t>& lens : {std::vector<int32_t>{8192, 100, 5000}, {1, 8192, 0}}) {
      gpu_test::expect_replay_with_lengths(graph, dev, c, lens, to_string(f));
    }
  }
}

TEST(QuantDecodeGpu, ZeroLengthSequencesGiveZerosAndNegativeInfinity) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (KvFormat f : kFormats) {
    for (int splits : {1, 4}) {
      testing::DecodeCase c;
      const QuantCase k{"zeros", spec(f, 2, 8, 2, 300, {0, 0}), splits};
      SPLITKV_RUN_OR_SKIP(k, &c);
      for (uint16_t bits : c.out) EXPECT_EQ(bits & 0x7fff, 0) << to_string(f);
      for (float l : c.lse) EXPECT_TRUE(std::isinf(l) && l < 0) << to_string(f);
    }
  }
}

}  // namespace
}  // namespace splitkv
