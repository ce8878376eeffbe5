// Decode kernel against the fp64 reference (docs/BENCHMARKING.md tolerances), plus the split-KV
// promises: determinism, batch invariance, CUDA-graph replay with new lengths, bad device input;
// each of the three ways to merge splits (combine kernel, cluster, fused) gives the same bits.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.hpp"
#include "late_writer.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

using testing::DecodeSpecBuilder;
using testing::DeviceBuffer;
using testing::DeviceDecodeCase;

struct GpuCase {
  std::string name;
  testing::DecodeCaseSpec spec;
  int num_splits = 0;  // 0: planner
  int split_tokens = 0;
  bool cluster_combine = false;
  bool fused_combine = false;
  std::string family;  // empty: the planner's choice
  bool atomic_combine = false;
  float atomic_reference_lse = 0.f;
  bool l2_prefetch = true;
  int l2_prefetch_keys = -1;  // -1: the planner's rule
  bool even_placement = true;
};

// Runs one case on the GPU with NaN-poisoned outputs (and workspace: only a fused combine's
// counters are prepared) and returns the comparison.
testing::Comparison run_case(const GpuCase& k, testing::DecodeCase* out_case = nullptr) {
  testing::DecodeCase c = testing::make_decode_case(k.spec);
  PlanOptions o;
  o.num_splits = k.num_splits;
  o.split_tokens = k.split_tokens;
  o.merge = k.cluster_combine  ? Merge::kCluster
            : k.fused_combine  ? Merge::kFused
            : k.atomic_combine ? Merge::kAtomic
                               : Merge::kAuto;
  o.family = k.family;
  o.atomic_reference_lse = k.atomic_reference_lse;
  o.tuning.l2_prefetch = k.l2_prefetch;
  o.tuning.l2_prefetch_keys = k.l2_prefetch_keys;
  o.tuning.even_placement = k.even_placement;
  Plan plan;
  Status s = plan_decode(c.problem, gpu_test::device(), o, &plan);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!k.family.empty()) EXPECT_EQ(plan.family(), k.family) << k.name;
  if (s.ok() && !gpu_test::plan_compiled(plan)) {  // a build without this instance: nothing to run
    std::printf("%s: skipped, %s not compiled into this build\n", k.name.c_str(), plan.family().c_str());
    testing::Comparison skipped;
    skipped.passed = true;
    return skipped;
  }
  EXPECT_EQ(plan.fused_combine(), k.fused_combine && plan.num_splits() > 1) << k.name;
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  s = prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  s = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  dev.download_outputs(c);
  testing::Comparison cmp = testing::check_decode(c);
  if (out_case) *out_case = std::move(c);
  return cmp;
}

class DecodeVsReference : public ::testing::TestWithParam<GpuCase> {};

TEST_P(DecodeVsReference, MatchesFp64Reference) {
  const GpuCase& k = GetParam();
  SPLITKV_REQUIRE_GPU(k.spec.problem.dtype, k.spec.problem.head_dim);
  for (float q_scale : {1.f, 8.f}) {  // flat and peaked softmax
    GpuCase scaled = k;
    scaled.spec.q_scale = q_scale;
    const testing::Comparison cmp = run_case(scaled);
    EXPECT_TRUE(cmp.passed) << k.name << " q_scale=" << q_scale << ": " << cmp.summary();
  }
}

std::vector<GpuCase> reference_cases() {
  std::vector<GpuCase> cases;
  auto add = [&](std::string name, DecodeSpecBuilder b, int splits = 0, int split_tokens = 0, bool cluster = false) {
    cases.push_back(GpuCase{std::move(name), b.spec, splits, split_tokens, cluster});
  };
  for (int len : {1, 2, 17, 63, 65, 1000, 4097, 65537}) add("len" + std::to_string(len), DecodeSpecBuilder(1, 32, 8, len));
  add("mixed_lengths_with_zero", DecodeSpecBuilder(5, 32, 8, 4097).lens({0, 4097, 1, 333, 2048}));
  add("gqa_28_4", DecodeSpecBuilder(2, 28, 4, 1500));
  add("gqa_40_8", DecodeSpecBuilder(2, 40, 8, 1333).lens({1333, 64}));
  add("mha_32_32", DecodeSpecBuilder(2, 32, 32, 1025));
  add("gqa_64_8", DecodeSpecBuilder(2, 64, 8, 777));
  add("mqa_8_1", DecodeSpecBuilder(3, 8, 1, 2000).lens({2000, 5, 1234}));
  add("paged16_shuffled", DecodeSpecBuilder(3, 32, 8, 3000).paged(16).lens({3000, 17, 0}));
  add("paged256_shuffled", DecodeSpecBuilder(2, 32, 8, 5000).paged(256).lens({4097, 5000}));
  add("paged32", DecodeSpecBuilder(2, 16, 4, 700).paged(32).lens({700, 65}));
  add("paged64", DecodeSpecBuilder(2, 16, 4, 700).paged(64));
  add("paged128", DecodeSpecBuilder(2, 16, 4, 700).paged(128).lens({129, 700}));
  add("spec_decode_q4_causal", DecodeSpecBuilder(2, 32, 8, 1000).queries(4, true).lens({1000, 3}));
  add("spec_decode_q16_causal_paged", DecodeSpecBuilder(2, 32, 8, 900).queries(16, true).paged(16).lens({900, 10}));
  add("q7_noncausal_mha", DecodeSpecBuilder(1, 8, 8, 600).queries(7, false));
  add("strided", DecodeSpecBuilder(2, 32, 8, 1000).strided());
  // Head-major caches ([slabs, Hkv, tokens, D] in memory, by strides): contiguous with splits,
  // 16-token pages with the head dimension padded, speculative queries on the 32-row tile.
  add("head_major_splits", DecodeSpecBuilder(2, 32, 8, 3000).head_major().lens({3000, 65}), 5);
  add("head_major_paged16_strided", DecodeSpecBuilder(3, 32, 8, 1000).paged(16).head_major().strided().lens({1000, 0, 17}));
  add("head_major_q8_28_4", DecodeSpecBuilder(2, 28, 4, 2000).queries(8, true).head_major().lens({2000, 9}), 3);
  add("hd64_fp16", DecodeSpecBuilder(2, 32, 8, 3000).head_dim(64).dtype(DType::kF16).lens({3000, 77}));
  add("hd64_bf16_paged", DecodeSpecBuilder(2, 16, 2, 1000).head_dim(64).paged(16));
  add("hd256_bf16", DecodeSpecBuilder(2, 16, 4, 2500).head_dim(256).lens({2500, 31}));
  add("hd256_fp16_paged_causal", DecodeSpecBuilder(1, 8, 2, 1200).head_dim(256).dtype(DType::kF16).paged(64).queries(3, true));
  add("fp16_hd128", DecodeSpecBuilder(2, 32, 8, 4097).dtype(DType::kF16));
  add("forced_one_split", DecodeSpecBuilder(1, 32, 8, 4097), 1);
  add("forced_many_splits", DecodeSpecBuilder(2, 32, 8, 4097).lens({4097, 100}), 48);
  add("cluster_16_splits", DecodeSpecBuilder(2, 28, 4, 5000).lens({5000, 0}).queries(2, true), 16, 0, true);
  add("cluster_3_splits_hd64_paged", DecodeSpecBuilder(2, 16, 2, 3000).head_dim(64).paged(32).lens({3000, 40}), 3, 0,
      true);
  add("cluster_hd256", DecodeSpecBuilder(1, 8, 2, 3000).head_dim(256), 12, 0, true);
  add("combine_kernel_16_splits", DecodeSpecBuilder(2, 28, 4, 5000).lens({5000, 0}).queries(2, true), 16);
  add("batch_invariant_split", DecodeSpecBuilder(3, 32, 8, 5000).lens({5000, 64, 0}), 0, 512);
  auto add_fused = [&](std::string name, DecodeSpecBuilder b, int splits = 0, int split_tokens = 0) {
    cases.push_back(GpuCase{std::move(name), b.spec, splits, split_tokens, false, true});
  };
  add_fused("fused_planned_len65537", DecodeSpecBuilder(1, 32, 8, 65537));
  add_fused("fused_16_splits", DecodeSpecBuilder(2, 28, 4, 5000).lens({5000, 0}).queries(2, true), 16);
  add_fused("fused_48_splits_mixed", DecodeSpecBuilder(5, 32, 8, 4097).lens({0, 4097, 1, 333, 2048}), 48);
  add_fused("fused_hd64_paged16", DecodeSpecBuilder(2, 16, 2, 3000).head_dim(64).paged(16).lens({3000, 40}), 7);
  add_fused("fused_hd256_fp16", DecodeSpecBuilder(1, 8, 2, 3000).head_dim(256).dtype(DType::kF16), 12);
  add_fused("fused_spec_q16_causal", DecodeSpecBuilder(2, 32, 8, 900).queries(16, true).lens({900, 10}), 5);
  add_fused("fused_batch_invariant", DecodeSpecBuilder(3, 32, 8, 5000).lens({5000, 64, 0}), 0, 512);
  // More than 16 packed rows per KV head on 32-row tiles (decode_mma_m32 by name: on these small
  // grids the planner keeps decode_mma's 16-row tiles; the last tile partly filled).
  // Cases of one family by name, their names prefixed.
  auto adder_for = [&](const char* family, const char* prefix) {
    return [&cases, family, prefix](std::string name, DecodeSpecBuilder b, int splits = 0, bool cluster = false,
                                    bool fused = false, int split_tokens = 0) {
      GpuCase k{prefix + name, b.spec, splits, split_tokens, cluster, fused};
      k.family = family;
      cases.push_back(k);
    };
  };
  auto add_m32 = adder_for("decode_mma_m32", "m32_");
  add_m32("gqa_28_4_q8_causal", DecodeSpecBuilder(2, 28, 4, 1500).queries(8, true).lens({1500, 9}));
  add_m32("gqa_64_2_q1", DecodeSpecBuilder(2, 64, 2, 2000).lens({2000, 333}));
  add_m32("hd64_fp16_q5_splits", DecodeSpecBuilder(2, 28, 4, 3000).head_dim(64).dtype(DType::kF16).queries(5, true), 7);
  add_m32("paged16_q16_noncausal", DecodeSpecBuilder(3, 32, 8, 1200).paged(16).queries(16, false).lens({1200, 0, 17}));
  add_m32("cluster_8_splits", DecodeSpecBuilder(2, 32, 8, 3000).queries(8, true), 8, true);
  add_m32("fused_12_splits", DecodeSpecBuilder(2, 32, 8, 3000).queries(8, true).lens({3000, 40}), 12, false, true);
  add_m32("batch_invariant", DecodeSpecBuilder(3, 64, 8, 5000).queries(4, true).lens({5000, 64, 0}), 0, false, false,
          512);
  // At most 8 packed rows per KV head with the keys as the MMA's rows (decode_mma_n8 by name): 1,
  // 4 (GQA 4), 6 (q_len 3 x GQA 2) and 8 rows (GQA 8, q_len 2 x GQA 4, q_len 8 MHA), every layout
  // and merge decode_mma serves.
  auto add_n8 = adder_for("decode_mma_n8", "n8_");
  for (int len : {1, 17, 1000, 65537}) add_n8("len" + std::to_string(len), DecodeSpecBuilder(1, 32, 8, len));
  add_n8("mixed_lengths_with_zero", DecodeSpecBuilder(5, 32, 8, 4097).lens({0, 4097, 1, 333, 2048}));
  add_n8("mha_32_32", DecodeSpecBuilder(2, 32, 32, 1025).lens({1025, 16}));
  add_n8("gqa_64_8", DecodeSpecBuilder(2, 64, 8, 2777).lens({2777, 9}));
  add_n8("mqa_8_1_paged16", DecodeSpecBuilder(3, 8, 1, 2000).paged(16).lens({2000, 5, 1234}));
  add_n8("q2_causal_32_8", DecodeSpecBuilder(3, 32, 8, 3000).queries(2, true).lens({3000, 1, 0}));
  add_n8("q3_noncausal_16_8", DecodeSpecBuilder(2, 16, 8, 700).queries(3, false));
  add_n8("q8_causal_mha_paged256", DecodeSpecBuilder(2, 8, 8, 5000).queries(8, true).paged(256).lens({4097, 5}));
  add_n8("paged16_shuffled", DecodeSpecBuilder(3, 32, 8, 3000).paged(16).lens({3000, 17, 0}));
  add_n8("paged64_q2", DecodeSpecBuilder(2, 16, 4, 700).paged(64).queries(2, true));
  add_n8("strided", DecodeSpecBuilder(2, 32, 8, 1000).strided());
  add_n8("head_major_paged16_strided", DecodeSpecBuilder(3, 32, 8, 1000).paged(16).head_major().strided().lens({1000, 0, 17}));
  add_n8("head_major_splits", DecodeSpecBuilder(2, 32, 8, 3000).head_major().lens({3000, 65}), 5);
  add_n8("hd64_fp16", DecodeSpecBuilder(2, 32, 8, 3000).head_dim(64).dtype(DType::kF16).lens({3000, 77}));
  add_n8("hd64_bf16_paged_q2", DecodeSpecBuilder(2, 16, 4, 1000).head_dim(64).paged(16).queries(2, true));
  add_n8("hd256_bf16", DecodeSpecBuilder(2, 16, 4, 2500).head_dim(256).lens({2500, 31}));
  add_n8("hd256_fp16_paged_causal", DecodeSpecBuilder(1, 8, 2, 1200).head_dim(256).dtype(DType::kF16).paged(64).queries(2, true));
  add_n8("fp16_hd128", DecodeSpecBuilder(2, 32, 8, 4097).dtype(DType::kF16));
  add_n8("forced_many_splits", DecodeSpecBuilder(2, 32, 8, 4097).lens({4097, 100}), 48);
  add_n8("cluster_16_splits_q2", DecodeSpecBuilder(2, 32, 8, 5000).lens({5000, 0}).queries(2, true), 16, true);
  add_n8("cluster_hd256", DecodeSpecBuilder(1, 8, 2, 3000).head_dim(256), 12, true);
  add_n8("fused_12_splits", DecodeSpecBuilder(2, 32, 8, 3000).lens({3000, 40}), 12, false, true);
  add_n8("batch_invariant", DecodeSpecBuilder(3, 64, 8, 5000).lens({5000, 64, 0}), 0, false, false, 512);
  // The opt-in atomic combine (nondeterministic bits, same tolerance): splits near the reference LSE
  // add atomically; a far reference sends every split down the exact fallback.
  auto add_atomic = [&](std::string name, DecodeSpecBuilder b, int splits, float reference = 0.f) {
    GpuCase k{"atomic_" + name, b.spec, splits};
    if (name.rfind("m32", 0) == 0) k.family = "decode_mma_m32";
    if (name.rfind("n8", 0) == 0) k.family = "decode_mma_n8";
    k.atomic_combine = true;
    k.atomic_reference_lse = reference;
    cases.push_back(k);
  };
  add_atomic("planned_len65537", DecodeSpecBuilder(1, 32, 8, 65537), 0);
  add_atomic("16_splits_q2_causal", DecodeSpecBuilder(2, 28, 4, 5000).lens({5000, 0}).queries(2, true), 16);
  add_atomic("48_splits_mixed", DecodeSpecBuilder(5, 32, 8, 4097).lens({0, 4097, 1, 333, 2048}), 48);
  add_atomic("hd64_paged16", DecodeSpecBuilder(2, 16, 2, 3000).head_dim(64).paged(16).lens({3000, 40}), 7);
  add_atomic("hd256_fp16", DecodeSpecBuilder(1, 8, 2, 3000).head_dim(256).dtype(DType::kF16), 12);
  add_atomic("m32_q8_causal", DecodeSpecBuilder(2, 32, 8, 3000).queries(8, true).lens({3000, 40}), 8);
  add_atomic("n8_q2_causal", DecodeSpecBuilder(2, 32, 8, 3000).queries(2, true).lens({3000, 40}), 8);
  add_atomic("far_reference_all_fallback", DecodeSpecBuilder(2, 32, 8, 4097).lens({4097, 900}), 12, 1000.f);
  add_atomic("negative_reference", DecodeSpecBuilder(2, 32, 8, 4097).lens({4097, 900}), 12, -30.f);
  // Decode served by chunked prefill over the cache (a prefill family named): the 64-row packed
  // tile on speculative rows (sequences shorter than q_len among them), with splits and pages, the
  // 128-row one, and q_len 1.
  auto add_via_prefill = [&](std::string name, const char* family, DecodeSpecBuilder b, int splits = 0) {
    GpuCase k{"via_prefill_" + name, b.spec, splits};
    k.family = family;
    cases.push_back(k);
  };
  const char* gqa64 = "prefill_sm90_gqa64";
  add_via_prefill("gqa64_q8_28_4_splits", gqa64, DecodeSpecBuilder(3, 28, 4, 3000).queries(8, true).lens({3000, 9, 5}), 4);
  add_via_prefill("gqa64_q4_paged16", gqa64, DecodeSpecBuilder(3, 32, 8, 1000).queries(4, true).paged(16).lens({1000, 3, 0}));
  add_via_prefill("gqa64_q7_noncausal_8_1", gqa64, DecodeSpecBuilder(2, 8, 1, 2000).queries(7, false).lens({2000, 65}), 3);
  add_via_prefill("gqa64_q1_mixed", gqa64, DecodeSpecBuilder(5, 32, 8, 4097).lens({0, 4097, 1, 333, 2048}));
  add_via_prefill("sm90_q8_32_8_paged64", "prefill_sm90", DecodeSpecBuilder(2, 32, 8, 1500).queries(8, true).paged(64), 2);
  GpuCase by_name{"mma16_q16_causal_paged", DecodeSpecBuilder(2, 32, 8, 900).queries(16, true).paged(16).lens({900, 10}).spec};
  by_name.family = "decode_mma";
  cases.push_back(by_name);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, DecodeVsReference, ::testing::ValuesIn(reference_cases()),
                         [](const ::testing::TestParamInfo<GpuCase>& info) { return info.param.name; });

// The planner's own route for speculative rows of 25-128 packed rows per KV head
// (PlanTuning::prefill_route): chunked prefill on prefill_sm90_gqa64 or, for 65-128 rows on large
// grids and for groups over 8, prefill_sm90_gqa; checked like any decode.
TEST(DecodeGpu, PlannerRouteForSpeculativeRowsMatchesReference) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  const char* gqa64 = "prefill_sm90_gqa64";
  const char* gqa128 = "prefill_sm90_gqa";
  std::vector<std::pair<GpuCase, const char*>> routed = {
      {{"q8_28_4", DecodeSpecBuilder(4, 28, 4, 4097).queries(8, true).lens({4097, 9, 0, 2000}).spec}, gqa64},
      {{"q6_paged16", DecodeSpecBuilder(4, 28, 4, 5000).queries(6, true).paged(16).lens({5000, 3, 4097, 700}).spec},
       gqa64},
      {{"q8_64_8_strided", DecodeSpecBuilder(2, 64, 8, 4500).queries(8, true).strided().lens({4500, 1000}).spec}, gqa64},
      {{"q8_28_4_head_major_splits", DecodeSpecBuilder(4, 28, 4, 4097).queries(8, true).head_major().spec, 6}, gqa64},
      {{"q16_28_4_two_tiles", DecodeSpecBuilder(2, 28, 4, 4500).queries(16, true).lens({4500, 12}).spec}, gqa64},
      {{"q16_28_4_paged16_wide_tile",
        DecodeSpecBuilder(8, 28, 4, 8192).queries(16, true).paged(16).lens({8192, 5, 100, 0, 3000, 17, 64, 1000}).spec},
       gqa128},
      {{"q8_64_4_group16", DecodeSpecBuilder(2, 64, 4, 8192).queries(8, true).lens({8192, 333}).spec}, gqa128},
      // 25-32 rows (run 52): 28 (q_len 4, 28/4) and 32 (q_len 4, 8/1) in the 64-row tile.
      {{"q4_28_4", DecodeSpecBuilder(4, 28, 4, 8192).queries(4, true).lens({8192, 2, 0, 3001}).spec}, gqa64},
      {{"q4_8_1_paged16",
        DecodeSpecBuilder(8, 8, 1, 8192).queries(4, true).paged(16).lens({8192, 4, 100, 0, 77, 5000, 1, 64}).spec},
       gqa64}};
  for (auto& [k, family] : routed) {
    Plan plan;
    PlanOptions o;
    o.num_splits = k.num_splits;
    ASSERT_TRUE(plan_decode(k.spec.problem, gpu_test::device(), o, &plan).ok());
    EXPECT_TRUE(plan.decode_via_prefill()) << k.name << ": " << plan.note();
    EXPECT_EQ(plan.family(), family) << k.name;
    for (float q_scale : {1.f, 8.f}) {
      k.spec.q_scale = q_scale;
      const testing::Comparison cmp = run_case(k);
      EXPECT_TRUE(cmp.passed) << k.name << " q_scale=" << q_scale << ": " << cmp.summary();
    }
  }
}

// The planner's own 2 splits merged in clusters of 2 (Merge::kAuto: 64 work units of
// single-query rows), contiguous and paged, against the reference.
TEST(DecodeGpu, PlannedTwoSplitsMergeInClustersOfTwo) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (GpuCase k : {GpuCase{"contiguous", DecodeSpecBuilder(8, 32, 8, 8192).lens({8192, 1, 0, 5000, 17, 8000, 4097, 64}).spec},
                    GpuCase{"paged16", DecodeSpecBuilder(8, 32, 8, 4096).paged(16).lens({4096, 3, 2000, 0, 4000, 16, 1000, 33}).spec}}) {
    Plan plan;
    ASSERT_TRUE(plan_decode(k.spec.problem, gpu_test::device(), {}, &plan).ok());
    EXPECT_EQ(plan.num_splits(), 2) << k.name << ": " << plan.note();
    EXPECT_TRUE(plan.cluster_combine()) << k.name << ": " << plan.note();
    for (float q_scale : {1.f, 8.f}) {
      k.spec.q_scale = q_scale;
      const testing::Comparison cmp = run_case(k);
      EXPECT_TRUE(cmp.passed) << k.name << " q_scale=" << q_scale << ": " << cmp.summary();
    }
  }
}

TEST(DecodeGpu, SplitResultsAreBitwiseDeterministic) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // 12 splits: two chunks, merged by two teams in the combine kernel; 70: nine chunks, two rounds
  // of eight teams (clusters hold at most 16 blocks, so 70 compares the fused merge only). The
  // fused merge stages its partials in rounds of as many whole chunks as the block's shared memory
  // holds: 70 splits take five rounds in decode_mma, two in decode_mma_n8 and three in
  // decode_quant_n8 over INT4 (the smallest ring), 12 one.
  const std::pair<const char*, KvFormat> families[] = {
      {"decode_mma", KvFormat::kNative}, {"decode_mma_n8", KvFormat::kNative}, {"decode_quant_n8", KvFormat::kInt4}};
  for (const int splits : {12, 70}) {
    for (const auto& [family, format] : families) {
      GpuCase by_kernel_case{"det", DecodeSpecBuilder(2, 32, 8, 20000).format(format).spec, splits};
      by_kernel_case.family = family;
      testing::DecodeCase by_kernel;
      run_case(by_kernel_case, &by_kernel);
      // Merged by the combine kernel, in a cluster, by each tile's last split block: run twice each.
      for (int way = 0; way < 3; ++way) {
        if (way == 1 && splits > 16) continue;
        GpuCase k{"det", DecodeSpecBuilder(2, 32, 8, 20000).format(format).spec, splits, 0, way == 1, way == 2};
        k.family = family;
        testing::DecodeCase first, second;
        run_case(k, &first);
        run_case(k, &second);
        const std::string where = std::string(family) + " way " + std::to_string(way) + ", " +
                                  std::to_string(splits) + " splits";
        EXPECT_EQ(first.out, second.out) << where;
        EXPECT_EQ(std::memcmp(first.lse.data(), second.lse.data(), first.lse.size() * sizeof(float)), 0) << where;
        // Every merge folds the same partials in the same order (merge_partials_in_order): the same bits.
        EXPECT_EQ(first.out, by_kernel.out) << where;
        EXPECT_EQ(std::memcmp(first.lse.data(), by_kernel.lse.data(), first.lse.size() * sizeof(float)), 0) << where;
      }
    }
  }
}

TEST(DecodeGpu, L2PrefetchBeforeTheWaitChangesNoBits) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // The prefetch is a hint: off, by the planner's rule, a few keys, and more keys than any split
  // holds give the same bits on every decode family, paged (shuffled, NaN in the unused slots) or
  // contiguous, with planned, forced and fixed-size splits, and match the reference.
  std::vector<GpuCase> shapes = {
      {"n8_short", DecodeSpecBuilder(1, 32, 8, 1000).spec},
      {"n8_paged16_mixed", DecodeSpecBuilder(3, 32, 8, 3000).paged(16).lens({3000, 17, 0}).spec},
      {"m16_q4_causal_splits", DecodeSpecBuilder(2, 32, 8, 1000).queries(4, true).lens({1000, 3}).spec, 5},
      {"m32_q8_head_major_paged64", DecodeSpecBuilder(2, 28, 4, 2000).queries(8, true).paged(64).head_major().lens({2000, 9}).spec, 3},
      {"batch_invariant", DecodeSpecBuilder(3, 32, 8, 5000).lens({5000, 64, 0}).spec, 0, 512},
  };
  shapes[0].family = "decode_mma_n8";
  shapes[2].family = "decode_mma";
  shapes[3].family = "decode_mma_m32";
  for (GpuCase k : shapes) {
    k.l2_prefetch = false;
    k.l2_prefetch_keys = 0;
    testing::DecodeCase without;
    EXPECT_TRUE(run_case(k, &without).passed) << k.name;
    k.l2_prefetch = true;
    // 0, the planner's rule, a few keys, every key (the most a plan takes: max_kv_len).
    for (int keys : {0, -1, 16, k.spec.problem.max_kv_len}) {
      k.l2_prefetch_keys = keys;
      testing::DecodeCase with;
      const testing::Comparison cmp = run_case(k, &with);
      EXPECT_TRUE(cmp.passed) << k.name << " keys " << keys << ": " << cmp.summary();
      EXPECT_EQ(with.out, without.out) << k.name << " keys " << keys;
      EXPECT_EQ(std::memcmp(with.lse.data(), without.lse.data(), with.lse.size() * sizeof(float)), 0)
          << k.name << " keys " << keys;
    }
  }
}

TEST(DecodeGpu, EvenPlacementChangesNoBits) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // Launched with the padded shared memory of PlanTuning::even_placement or with the kernel's own,
  // one-wave grids give the same bits and match the reference: 16-bit and INT4 caches, planned and
  // forced splits, paged, the combine kernel and the fused merge.
  std::vector<GpuCase> shapes = {
      {"n8_planned", DecodeSpecBuilder(2, 32, 8, 20000).spec},
      {"n8_paged16_mixed", DecodeSpecBuilder(3, 32, 8, 3000).paged(16).lens({3000, 17, 0}).spec},
      {"int4_two_per_sm", DecodeSpecBuilder(8, 32, 8, 4096).format(KvFormat::kInt4).lens({4096, 1, 4000, 0, 77, 4096, 2048, 333}).spec},
      {"int4_fused", DecodeSpecBuilder(4, 32, 8, 8192).format(KvFormat::kInt4).spec},
  };
  shapes[3].fused_combine = true;
  for (GpuCase k : shapes) {
    testing::DecodeCase probe = testing::make_decode_case(k.spec);
    PlanOptions o;
    if (k.fused_combine) o.merge = Merge::kFused;
    Plan plan;
    ASSERT_TRUE(plan_decode(probe.problem, gpu_test::device(), o, &plan).ok()) << k.name;
    EXPECT_GT(plan.launch_smem_bytes(), plan.smem_bytes()) << k.name << ": the premise, a padded launch";
    testing::DecodeCase padded, own;
    EXPECT_TRUE(run_case(k, &padded).passed) << k.name;
    k.even_placement = false;
    EXPECT_TRUE(run_case(k, &own).passed) << k.name;
    EXPECT_EQ(padded.out, own.out) << k.name;
    EXPECT_EQ(std::memcmp(padded.lse.data(), own.lse.data(), own.lse.size() * sizeof(float)), 0) << k.name;
  }
}

TEST(DecodeGpu, BatchInvariantModeGivesTheSameBitsWhateverTheBatch) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // Sequence of 3000 keys alone, and in a batch with a 20000-key sequence (more splits, another
  // plan): with a fixed split size its output bits are identical.
  testing::DecodeCase alone = testing::make_decode_case(DecodeSpecBuilder(1, 32, 8, 3000).spec);
  testing::DecodeCase paired = testing::make_decode_case(DecodeSpecBuilder(3, 32, 8, 20000).lens({20000, 3000, 7}).spec);
  testing::copy_sequence(alone, 0, paired, 1);
  std::vector<uint16_t> bits[2];
  int i = 0;
  for (auto [c, b] : {std::pair{&alone, 0}, std::pair{&paired, 1}}) {
    PlanOptions o;
    o.split_tokens = 1024;
    Plan plan;
    ASSERT_TRUE(plan_decode(c->problem, gpu_test::device(), o, &plan).ok());
    DeviceDecodeCase dev(*c);
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    ASSERT_TRUE(run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
    dev.download_outputs(*c);
    EXPECT_TRUE(testing::check_decode(*c).passed);
    bits[i++] = testing::sequence_output_bits(*c, b);
  }
  EXPECT_EQ(bits[0], bits[1]);
}

// Capture once with the plan's bound, then change the lengths on the device and replay. The
// cache holds valid keys up to the bound in every sequence, so any length up to it is meaningful.
// With the fused combine the counters are prepared once, before capture, and every replay must
// leave them ready for the next.
// How a plan merges its splits: the combine kernel, the fused combine, the atomic combine.
// kPrefillRoute / kWidePrefillRoute: speculative shapes the planner serves by chunked prefill, on
// the 64-row tile and on the 128-row tile's persistent grid (its tile counter zeroed inside the
// graph); their splits merged by the combine kernel.
enum class ReplayMerge { kCombineKernel, kFused, kAtomic, kPrefillRoute, kWidePrefillRoute };

class DecodeGraphReplay : public ::testing::TestWithParam<ReplayMerge> {};

TEST_P(DecodeGraphReplay, ServesNewLengths) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  const bool routed = GetParam() == ReplayMerge::kPrefillRoute || GetParam() == ReplayMerge::kWidePrefillRoute;
  testing::DecodeCase c = testing::make_decode_case(GetParam() == ReplayMerge::kPrefillRoute
                                                        ? DecodeSpecBuilder(3, 28, 4, 8192).queries(8, true).spec
                                                    : GetParam() == ReplayMerge::kWidePrefillRoute
                                                        ? DecodeSpecBuilder(3, 32, 2, 8192).queries(8, true).spec
                                                        : DecodeSpecBuilder(3, 32, 8, 8192).spec);
  Plan plan;
  PlanOptions o;
  o.max_splits = 16;
  if (GetParam() == ReplayMerge::kFused) o.merge = Merge::kFused;
  if (GetParam() == ReplayMerge::kAtomic) o.merge = Merge::kAtomic;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
  ASSERT_GT(plan.num_splits(), 1);
  ASSERT_EQ(plan.decode_via_prefill(), routed) << plan.note();
  if (GetParam() == ReplayMerge::kWidePrefillRoute) ASSERT_EQ(plan.family(), "prefill_sm90_gqa") << plan.note();
  ASSERT_EQ(plan.fused_combine(), GetParam() == ReplayMerge::kFused);
  ASSERT_EQ(plan.atomic_combine(), GetParam() == ReplayMerge::kAtomic);
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr).ok());
  const gpu_test::CapturedCall graph(
      [&](cudaStream_t stream) { return run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), stream); });
  ASSERT_TRUE(graph.ok()) << graph.error();
  for (const std::vector<int32_t>& lens :
       {std::vector<int32_t>{8192, 100, 5000}, {1, 8192, 0}, {4097, 3, 8000}}) {
    gpu_test::expect_replay_with_lengths(graph, dev, c, lens);
  }
}

INSTANTIATE_TEST_SUITE_P(Combine, DecodeGraphReplay,
                         ::testing::Values(ReplayMerge::kCombineKernel, ReplayMerge::kFused, ReplayMerge::kAtomic, ReplayMerge::kPrefillRoute,
                                           ReplayMerge::kWidePrefillRoute),
                         [](const ::testing::TestParamInfo<ReplayMerge>& info) {
                           return std::string(info.param == ReplayMerge::kFused              ? "fused"
                                              : info.param == ReplayMerge::kAtomic           ? "atomic"
                                              : info.param == ReplayMerge::kPrefillRoute     ? "prefill_route"
                                              : info.param == ReplayMerge::kWidePrefillRoute ? "wide_prefill_route"
                                                                                       : "combine_kernel");
                         });

// Under programmatic dependent launch a decode block runs its prefetches (and reads its length,
// for the key prefetch) before it waits for the kernel ahead. Here the kernel ahead lets it launch
// at once and writes the real lengths only 100 µs later, over stale ones (longer, shorter, zero, out
// of range): the output must be the real lengths'. Contiguous and paged, 16-bit and quantized,
// q_len 1, 2, 4 and 8, every decode kernel kind and the chunked-prefill route (a length guessed
// before the wait, run 67, was written against this test).
TEST(DecodeGpu, LengthsWrittenByTheKernelAheadAreTheOnesRead) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  struct LateCase {
    const char* name;
    testing::DecodeCaseSpec spec;  // with the real lengths
    std::vector<int32_t> stale;
    const char* family = "";  // named: the planner would pick another kernel for this shape
  };
  const LateCase cases[] = {
      {"bf16", DecodeSpecBuilder(3, 32, 8, 3000).lens({3000, 700, 0}).spec, {1000, 2999, -5}},
      {"int4_paged16", DecodeSpecBuilder(3, 32, 8, 4096).format(KvFormat::kInt4).paged(16).lens({4096, 1, 2500}).spec,
       {100, 4096, 0}},
      {"fp8_q2_causal", DecodeSpecBuilder(2, 32, 8, 2000).format(KvFormat::kFP8E4M3).queries(2, true).lens({2000, 37}).spec,
       {37, 2000}},
      {"bf16_q4_causal_decode_mma", DecodeSpecBuilder(2, 32, 8, 2500).queries(4, true).lens({2500, 9}).spec, {9, 2500},
       "decode_mma"},
      {"bf16_q8_causal_prefill_route", DecodeSpecBuilder(2, 32, 8, 2500).queries(8, true).lens({40, 2500}).spec,
       {2500, 0}, "prefill_sm90_gqa64"},
  };
  for (const LateCase& k : cases) {
    testing::DecodeCase c = testing::make_decode_case(k.spec);
    PlanOptions o;
    o.family = k.family;
    Plan plan;
    const Status planned = plan_decode(c.problem, gpu_test::device(), o, &plan);
    ASSERT_TRUE(planned.ok()) << k.name << ": " << planned.message();
    if (!gpu_test::plan_compiled(plan)) continue;  // a build without this instance
    if (*k.family == '\0') {
      EXPECT_TRUE(plan.family() == "decode_mma_n8" || plan.family() == "decode_quant_n8" || plan.family() == "decode_quant")
          << k.name << ": " << plan.family();
      EXPECT_TRUE(plan.l2_prefetch()) << k.name;
    }
    DeviceDecodeCase dev(c);
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    ASSERT_TRUE(prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr).ok());
    testing::poison_outputs(c);
    dev.upload_outputs(c);
    dev.upload_seq_lens(k.stale);
    const DeviceBuffer real = DeviceBuffer::from(c.seq_lens);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(gpu_test::write_int32_late(static_cast<int32_t*>(dev.seq_lens.get()), static_cast<const int32_t*>(real.get()),
                                         int(c.seq_lens.size()), 100, stream),
              cudaSuccess);
    const Status s = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), stream);
    EXPECT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
    dev.download_outputs(c);
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << k.name << ": " << cmp.summary();
  }
}

// Lengths and page ids are device data: run() cannot check them on the host. Bad ones must not
// be read past, and must show up as NaN in that sequence's output (never a silent wrong answer),
// whichever way the splits merge.
TEST(DecodeGpu, BadDeviceLengthsAndPagesBecomeNaNNotOutOfBounds) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // The chunked-prefill route's family (named: these grids are below its thresholds) and the
  // keys-as-rows 16-bit kernel, by name.
  struct Config {
    int page_size;
    bool atomic;
    const char* family;
    int q_len = 1;
  };
  for (const Config& config :
       {Config{0, false, ""}, Config{16, false, ""}, Config{16, true, ""}, Config{0, false, "prefill_sm90_gqa64", 8},
        Config{16, false, "prefill_sm90_gqa64", 8}, Config{0, false, "decode_mma_n8", 2},
        Config{16, false, "decode_mma_n8", 2}}) {
    const int page_size = config.page_size;
    const bool atomic = config.atomic;
    DecodeSpecBuilder b = DecodeSpecBuilder(3, 8, 2, 500).paged(page_size).lens({500, 200, 300});
    if (config.q_len > 1) b.queries(config.q_len, true);
    testing::DecodeCase c = testing::make_decode_case(b.spec);
    PlanOptions o;
    o.num_splits = 3;
    if (atomic) o.merge = Merge::kAtomic;
    o.family = config.family;
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
    DeviceDecodeCase dev(c);
    dev.tensors.seq_lens_host = nullptr;  // the host cannot see what the device will read
    dev.tensors.block_table_host = nullptr;
    const int capacity = page_size ? int(c.max_pages) * page_size : int(c.k_ref.shape[1]);
    std::vector<int32_t> lens = {capacity + 1, 200, 300};  // sequence 0: beyond the cache
    dev.upload_seq_lens(lens);
    if (page_size) {
      std::vector<int32_t> table = c.block_table;
      table[2 * c.max_pages + 1] = 1 << 20;  // sequence 2: a page id past the pool
      dev.block_table.upload(table.data(), table.size() * sizeof(int32_t));
    }
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    ASSERT_TRUE(prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr).ok());
    ASSERT_TRUE(run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
    dev.download_outputs(c);
    const int per_seq = c.problem.q_len * c.problem.num_q_heads * c.problem.head_dim;
    auto all_nan = [&](int b) {
      for (int j = 0; j < per_seq; ++j)
        if (!std::isnan(testing::dense_values(c.host_tensors().out)[size_t(b * per_seq + j)])) return false;
      return true;
    };
    const std::string config_name =
        "page_size " + std::to_string(page_size) + (atomic ? " atomic " : " ") + config.family;
    EXPECT_TRUE(all_nan(0)) << config_name;
    EXPECT_FALSE(std::isnan(testing::dense_values(c.host_tensors().out)[size_t(per_seq) + size_t(per_seq) - 1]))
        << config_name << ": sequence 1 is valid";
    if (page_size) EXPECT_TRUE(all_nan(2)) << config_name;
  }
}

TEST(DecodeGpu, ZeroLengthSequencesGiveZerosAndNegativeInfinity) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (int splits : {1, 4}) {
    testing::DecodeCase c;
    GpuCase k{"zeros", DecodeSpecBuilder(2, 8, 2, 300).lens({0, 0}).spec, splits, 0};
    run_case(k, &c);
    for (uint16_t bits : c.out) EXPECT_EQ(bits & 0x7fff, 0);
    for (float l : c.lse) EXPECT_TRUE(std::isinf(l) && l < 0);
  }
}

}  // namespace
}  // namespace splitkv
