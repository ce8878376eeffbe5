// The logit softcap and the sliding window on the GPU (docs/VARIANTS.md): every decode family's
// variants instance (kernels/common/score_softcap.cuh; the window's rows and split rule in
// decode/decode_block.cuh) against the fp64 reference, outputs and workspace poisoned: the 16-bit
// families of 8, 16 and 32 packed rows, the quantized families of each format, the *_kc decode
// kernel, D 64 / 128 / 256, paged caches, forced and batch-invariant splits, the cluster, fused and
// combine-kernel merges; caps that bind hard (1) and Gemma's 50; windows of 0, of one block's
// width, smaller than a split, larger than the context, with a right side, on speculative rows
// (each row's window starts elsewhere), and with sinks and an FP8 cache as gpt-oss runs. Each case
// also checks that its variants changed the answer where they should: the same output against
// the reference without them must fail (a test that cannot fail is a defect). A plan that runs
// chunked prefill (a *_kc cache's default) serves both through the prefill kernels; a captured
// graph replays with new lengths.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;
using testing::DeviceDecodeCase;

struct VariantCase {
  std::string name;
  testing::DecodeCaseSpec spec;
  std::string family;  // empty: the planner's
  int num_splits = 0;
  int split_tokens = 0;
  Merge merge = Merge::kAuto;
  bool binds = true;  // the variants change the answer (false: a window wider than the context)
};

struct Variants {
  float cap = 0.f;
  int left = -1, right = -1;
  bool sinks = false;
  bool tree = false;  // a random draft tree per sequence over its last q_len keys
};

testing::DecodeCaseSpec with(testing::DecodeSpecBuilder b, Variants v, float q_scale = 8.f) {
  b.spec.problem.softcap = v.cap;
  b.spec.problem.window_left = v.left;
  b.spec.problem.window_right = v.right;
  b.spec.problem.sinks = v.sinks;
  b.spec.problem.tree_mask = v.tree;
  b.spec.q_scale = q_scale;
  return b.spec;
}

std::vector<VariantCase> variant_cases() {
  using B = testing::DecodeSpecBuilder;
  const Variants cap1{1.f}, cap2{2.f};
  std::vector<VariantCase> c;
  // The softcap. 16-bit caches: decode_mma_n8 (<= 8 rows), decode_mma (16), decode_mma_m32 (32).
  c.push_back({"cap_n8", with(B(2, 32, 8, 3000).lens({3000, 17}), cap1), "decode_mma_n8", 5});
  c.push_back({"cap50_n8_peaked", with(B(2, 32, 8, 3000).lens({3000, 0}), Variants{50.f}, 40.f), "decode_mma_n8"});
  c.push_back({"cap_m16_q4_causal_paged16", with(B(2, 32, 8, 2000).queries(4, true).paged(16).lens({2000, 9}), cap1),
               "decode_mma"});
  c.push_back({"cap_m32_q8_causal", with(B(2, 32, 8, 3000).queries(8, true).lens({3000, 100}), cap2), "decode_mma_m32", 3});
  c.push_back({"cap_mha_d256", with(B(1, 8, 8, 1500).head_dim(256), cap1), "", 4});
  c.push_back({"cap_fp16_d64_gqa8", with(B(3, 64, 8, 4096).head_dim(64).dtype(DType::kF16).lens({4096, 128, 1}), cap1)});
  c.push_back({"cap_batch_invariant", with(B(3, 32, 8, 5000).lens({5000, 64, 0}), cap1), "", 0, 512});
  c.push_back({"cap_cluster_merge", with(B(1, 32, 8, 8000), cap1), "", 8, 0, Merge::kCluster});
  c.push_back({"cap_fused_merge", with(B(2, 32, 8, 8000).lens({8000, 300}), cap1), "", 6, 0, Merge::kFused});
  // Quantized caches: decode_quant (16 rows) and decode_quant_n8 per format, the *_kc kernel.
  c.push_back({"cap_fp8_q4_causal",
               with(B(2, 32, 8, 3000).format(KvFormat::kFP8E4M3).queries(4, true).lens({3000, 70}), cap1),
               "decode_quant"});
  c.push_back({"cap_fp8_n8", with(B(2, 32, 8, 3000).format(KvFormat::kFP8E4M3).lens({3000, 70}), cap1),
               "decode_quant_n8", 3});
  c.push_back({"cap_int8_n8_paged64", with(B(2, 32, 8, 3000).format(KvFormat::kInt8).paged(64).lens({3000, 70}), cap1),
               "decode_quant_n8"});
  c.push_back({"cap_int4_n8_splits", with(B(2, 32, 8, 5000).format(KvFormat::kInt4).lens({5000, 33}), cap1),
               "decode_quant_n8", 7});
  c.push_back({"cap_int4_q4_causal",
               with(B(2, 32, 8, 3000).format(KvFormat::kInt4).queries(4, true).lens({3000, 5}), cap1), "decode_quant"});
  c.push_back({"cap_k8v4_n8", with(B(2, 32, 8, 3000).format(KvFormat::kK8V4).lens({3000, 200}), cap2),
               "decode_quant_n8"});
  c.push_back({"cap_int4_kc_kernel", with(B(3, 32, 8, 2000).format(KvFormat::kInt4Kc).lens({2000, 65, 63}), cap1),
               "decode_kc_n8"});
  c.push_back({"cap_int8_kc_kernel_splits", with(B(2, 32, 8, 3000).format(KvFormat::kInt8Kc).lens({3000, 700}), cap1),
               "decode_kc_n8", 6});

  // The sliding window (left, right). 16-bit caches first.
  c.push_back({"win128_n8", with(B(2, 32, 8, 3000).lens({3000, 100}), Variants{0.f, 128}), "decode_mma_n8"});
  c.push_back({"win0_n8", with(B(2, 32, 8, 3000).lens({3000, 1}), Variants{0.f, 0}), "decode_mma_n8"});
  c.push_back({"win64_q4_causal_paged16", with(B(2, 32, 8, 2000).queries(4, true).paged(16).lens({2000, 9}),
                                                Variants{0.f, 64}),
               "decode_mma"});
  c.push_back({"win100_q8_causal_m32", with(B(2, 32, 8, 3000).queries(8, true).lens({3000, 100}), Variants{0.f, 100}),
               "decode_mma_m32", 3});
  c.push_back({"win1000_forced_splits", with(B(2, 32, 8, 20000).lens({20000, 1500}), Variants{0.f, 1000}), "", 8});
  c.push_back({"win700_batch_invariant", with(B(3, 32, 8, 5000).lens({5000, 64, 0}), Variants{0.f, 700}), "", 0, 512});
  c.push_back({"win300_cluster_merge", with(B(1, 32, 8, 8000), Variants{0.f, 300}), "", 4, 0, Merge::kCluster});
  // The planner's own merge for a short window over a long context: 8 splits of the window's band
  // merged in a thread-block cluster (sm_90; the combine kernel elsewhere).
  c.push_back({"win1000_auto_plan_long_context", with(B(1, 32, 8, 20000), Variants{0.f, 1000})});
  c.push_back({"win300_fused_merge", with(B(2, 32, 8, 8000).lens({8000, 300}), Variants{0.f, 300}), "", 4, 0,
               Merge::kFused});
  c.push_back({"win_wider_than_context", with(B(2, 32, 8, 700).lens({700, 5}), Variants{0.f, 5000}), "", 0, 0,
               Merge::kAuto, false});
  c.push_back({"win_both_sides_q4_noncausal", with(B(2, 32, 8, 900).queries(4, false).lens({900, 40}), Variants{0.f, 16, 1}),
               "decode_mma"});
  c.push_back({"win_d256_mha", with(B(1, 8, 8, 1500).head_dim(256), Variants{0.f, 200}), "", 3});
  // Quantized caches.
  c.push_back({"win256_int4_n8", with(B(2, 32, 8, 5000).format(KvFormat::kInt4).lens({5000, 33}), Variants{0.f, 256}),
               "decode_quant_n8", 4});
  c.push_back({"win64_int8_q4_causal", with(B(2, 32, 8, 3000).format(KvFormat::kInt8).queries(4, true).lens({3000, 70}),
                                             Variants{0.f, 64}),
               "decode_quant"});
  c.push_back({"win200_k8v4_paged64", with(B(2, 32, 8, 3000).format(KvFormat::kK8V4).paged(64).lens({3000, 250}),
                                            Variants{0.f, 200}),
               "decode_quant_n8"});
  c.push_back({"win100_int4_kc_kernel", with(B(3, 32, 8, 2000).format(KvFormat::kInt4Kc).lens({2000, 130, 65}),
                                              Variants{0.f, 100}),
               "decode_kc_n8", 3});
  c.push_back({"win0_int8_kc_kernel", with(B(2, 32, 8, 1000).format(KvFormat::kInt8Kc).lens({1000, 64}), Variants{0.f, 0}),
               "decode_kc_n8"});
  // One split: a window's keys start on the 16-key sub-tile before its first visible key, off the
  // 64-key block edge (window 100 at length 3000: key 2896; at length 250: key 144).
  const Variants win100{0.f, 100};
  c.push_back({"win100_one_split_n8", with(B(2, 32, 8, 3000).lens({3000, 250}), win100), "decode_mma_n8", 1});
  c.push_back({"win100_one_split_m16_q4_paged16",
               with(B(2, 32, 8, 3000).queries(4, true).paged(16).lens({3000, 250}), win100), "decode_mma", 1});
  c.push_back({"win100_one_split_m32_q8", with(B(2, 32, 8, 3000).queries(8, true).lens({3000, 250}), win100),
               "decode_mma_m32", 1});
  c.push_back({"win100_one_split_int4_n8", with(B(2, 32, 8, 3000).format(KvFormat::kInt4).lens({3000, 250}), win100),
               "decode_quant_n8", 1});
  c.push_back({"win100_one_split_int8_q4",
               with(B(2, 32, 8, 3000).format(KvFormat::kInt8).queries(4, true).lens({3000, 250}), win100), "decode_quant",
               1});
  c.push_back({"win100_one_split_k8v4_paged16",
               with(B(2, 32, 8, 3000).format(KvFormat::kK8V4).paged(16).lens({3000, 250}), win100), "decode_quant_n8", 1});
  c.push_back({"win100_one_split_fp8_q4_sinks",
               with(B(2, 32, 8, 3000).format(KvFormat::kFP8E4M3).queries(4, true).lens({3000, 250}),
                    Variants{0.f, 100, -1, true}, 2.f),
               "decode_quant", 1});
  // Together: window + sinks + FP8 + speculative rows (gpt-oss: 64/8 heads, D=64, window 128), and
  // window + softcap.
  c.push_back({"gpt_oss_fp8_q4_window_sinks",
               with(B(4, 64, 8, 4096).head_dim(64).format(KvFormat::kFP8E4M3).queries(4, true).lens({4096, 128, 3, 0}),
                    Variants{0.f, 128, -1, true}, 2.f)});
  c.push_back({"gpt_oss_bf16_q1_window_sinks", with(B(4, 64, 8, 4096).head_dim(64).lens({4096, 129, 1, 0}),
                                                    Variants{0.f, 128, -1, true}, 2.f)});
  c.push_back({"window_and_cap_int4", with(B(2, 32, 8, 4000).format(KvFormat::kInt4).lens({4000, 77}), Variants{1.f, 500}),
               "", 5});

  // Tree masks over the drafts (speculative rows): every family, forced splits across the drafts,
  // the cluster merge, a sequence shorter than q_len, and with a window, sinks and an FP8 cache.
  const Variants tree{0.f, -1, -1, false, true};
  c.push_back({"tree_q4_m16_paged16", with(B(3, 32, 8, 2000).queries(4, true).paged(16).lens({2000, 9, 2}), tree),
               "decode_mma"});
  c.push_back({"tree_q8_m32", with(B(2, 32, 8, 3000).queries(8, true).lens({3000, 100}), tree), "decode_mma_m32", 3});
  c.push_back({"tree_q2_n8", with(B(2, 32, 8, 3000).queries(2, true).lens({3000, 70}), tree), "decode_mma_n8"});
  c.push_back({"tree_q16_mha_splits", with(B(2, 8, 8, 3000).queries(16, true).lens({3000, 40}), tree), "", 7});
  // (The short second sequence makes the mask bind: among 8000 keys six drafts weigh too little.)
  c.push_back({"tree_q6_cluster_merge", with(B(2, 16, 8, 8000).queries(6, true).lens({8000, 20}), tree), "", 8, 0,
               Merge::kCluster});
  c.push_back({"tree_q4_int4", with(B(2, 32, 8, 3000).format(KvFormat::kInt4).queries(4, true).lens({3000, 5}), tree),
               "decode_quant"});
  c.push_back({"tree_q2_int8_n8", with(B(2, 32, 8, 3000).format(KvFormat::kInt8).queries(2, true).lens({3000, 5}), tree),
               "decode_quant_n8"});
  c.push_back({"tree_q2_int8_kc_kernel",
               with(B(2, 32, 8, 2000).format(KvFormat::kInt8Kc).queries(2, true).lens({2000, 65}), tree), "decode_kc_n8"});
  c.push_back({"gpt_oss_fp8_q4_tree_window_sinks",
               with(B(4, 64, 8, 4096).head_dim(64).format(KvFormat::kFP8E4M3).queries(4, true).lens({4096, 128, 3, 0}),
                    Variants{0.f, 128, -1, true, true}, 2.f)});
  return c;
}

Status plan_case(const VariantCase& k, const DecodeProblem& problem, Plan* plan) {
  PlanOptions o;
  o.family = k.family;
  o.num_splits = k.num_splits;
  o.split_tokens = k.split_tokens;
  o.merge = k.merge;
  return plan_decode(problem, gpu_test::device(), o, plan);
}

class DecodeVariantsVsReference : public ::testing::TestWithParam<VariantCase> {};

TEST_P(DecodeVariantsVsReference, MatchesFp64ReferenceAndTheVariantsBind) {
  const VariantCase& k = GetParam();
  SPLITKV_REQUIRE_GPU(k.spec.problem.dtype, k.spec.problem.head_dim);
  testing::DecodeCase c = testing::make_decode_case(k.spec);
  Plan plan;
  const Status planned = plan_case(k, c.problem, &plan);
  ASSERT_TRUE(planned.ok()) << k.name << ": " << planned.message();
  ASSERT_FALSE(plan.decode_via_prefill()) << k.name << ": " << describe(plan);
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  if (k.merge == Merge::kFused) ASSERT_TRUE(prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr).ok());
  const Status ran = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  ASSERT_TRUE(ran.ok()) << k.name << ": " << ran.message();
  dev.download_outputs(c);
  const std::string what = k.name + " (" + plan.family() + ", " + std::to_string(plan.num_splits()) + " splits)";
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << what << ": " << cmp.summary();
  testing::DecodeCase plain = c;
  plain.problem.softcap = 0.f;
  plain.problem.window_left = plain.problem.window_right = -1;
  plain.problem.tree_mask = false;
  EXPECT_EQ(testing::check_decode(plain).passed, !k.binds) << what << ": the variants "
                                                          << (k.binds ? "did not change" : "changed") << " the answer";
}

INSTANTIATE_TEST_SUITE_P(Cases, DecodeVariantsVsReference, ::testing::ValuesIn(variant_cases()),
                         [](const ::testing::TestParamInfo<VariantCase>& info) { return info.param.name; });

// A cap large enough to leave every score as it is gives the uncapped answer (the tanh keeps its
// relative accuracy for tiny arguments).
TEST(DecodeVariantsGpu, AHugeCapIsTheUncappedAnswer) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c = testing::make_decode_case(with(testing::DecodeSpecBuilder(2, 32, 8, 3000), Variants{1e30f}));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), PlanOptions{}, &plan).ok());
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
  ASSERT_TRUE(gpu_test::run_decode_case(plan, c));
  testing::DecodeCase uncapped = c;
  uncapped.problem.softcap = 0.f;
  const testing::Comparison cmp = testing::check_decode(uncapped);
  EXPECT_TRUE(cmp.passed) << cmp.summary();
}

// The 32-row tile's variants instance at D=64 has two twins a plan may launch: one with two warps
// for blocks of a short window (five blocks per SM: 2048 and 512 blocks in 4 and 1 rounds, not 8
// and 2) and one register-bound for three
// blocks per SM, for long blocks where the grid then runs in one round (B=16 window 4096: 384
// blocks, one round, not two). FP8's 16-row block at D=64 (decode_quant) has a two-warp twin for
// short blocks too (eight blocks per SM), and so has the 8-row block over a 16-bit cache at D=64
// (decode_mma_n8, single-query rows: six blocks per SM, for grids it runs in one round: B=64, not
// B=256). Against the reference (the bound twin's
// spilled values included), sequences of every length class, with and without sinks.
TEST(DecodeVariantsGpu, TheVariantsTwinsMatchTheReference) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 64);
  struct TwinCase {
    int batch, max_len, window;
    bool sinks;
    int short_twin_warps, register_bound_blocks;  // the plan's on a 132-SM device
    KvFormat format = KvFormat::kNative;
    const char* family = "decode_mma_m32";
    int q_len = 4;
  };
  for (const TwinCase& k :
       {TwinCase{256, 384, 128, true, 2, 6}, TwinCase{64, 384, 128, false, 2, 0}, TwinCase{16, 8192, 4096, false, 0, 3},
        TwinCase{256, 384, 128, true, 2, 0, KvFormat::kFP8E4M3, "decode_quant"},
        TwinCase{256, 384, 128, true, 0, 0, KvFormat::kNative, "decode_mma_n8", 1},
        TwinCase{64, 384, 128, false, 2, 0, KvFormat::kNative, "decode_mma_n8", 1}}) {
    std::vector<int> lens(k.batch);
    for (int b = 0; b < k.batch; ++b) lens[b] = b % 4 == 0 ? k.max_len : b % 4 == 1 ? 129 : b % 4 == 2 ? 5 : 0;
    testing::DecodeCase c = testing::make_decode_case(
        with(testing::DecodeSpecBuilder(k.batch, 64, 8, k.max_len)
                 .head_dim(64)
                 .queries(k.q_len, true)
                 .lens(lens)
                 .format(k.format),
             Variants{0.f, k.window, -1, k.sinks}, 2.f));
    PlanOptions o;
    o.tuning.decode_stream = false;  // the twins themselves (the stream kernel has its own test)
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
    if (!gpu_test::plan_compiled(plan)) {
      std::printf("  skipped, not compiled into this build: %s\n", plan.family().c_str());
      continue;
    }
    ASSERT_EQ(plan.family(), k.family);
    if (gpu_test::device().sm_count == 132) {  // H100, H200: the rounds counted above
      EXPECT_EQ(plan.short_twin_warps(), k.short_twin_warps) << describe(plan);
      EXPECT_EQ(plan.register_bound_blocks(), k.register_bound_blocks) << describe(plan);
    }
    ASSERT_TRUE(gpu_test::run_decode_case(plan, c));
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << "B=" << k.batch << " window " << k.window << ": " << cmp.summary();
  }
}

// PlanTuning::decode_stream (on): the short twin's one-split plans of several rounds on the stream
// kernel, one warp per (sequence, KV head) item over a persistent grid; a batch that is no multiple
// of the grid's warps, lengths of every class (zero, shorter than q_len, one window, longer), with
// and without sinks, contiguous and paged, with a window and with a draft tree over short rows; and
// single-query rows (8 packed rows) on the 16-row tile's stream kernel, where decode_mma is named.
TEST(DecodeVariantsGpu, TheStreamKernelMatchesTheReference) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 64);
  struct StreamCase {
    int batch;
    bool sinks;
    int page_size;
    bool tree = false;  // a draft tree over short rows (no window: blocks of <= 200 keys)
    int q_len = 4;
    const char* family = "";  // decode_mma: single-query rows on the 16-row tile's stream kernel
  };
  for (const StreamCase& k :
       {StreamCase{256, true, 0}, StreamCase{1500, false, 0}, StreamCase{300, true, 16}, StreamCase{256, false, 0, true},
        StreamCase{300, true, 16, true}, StreamCase{256, true, 0, false, 1, "decode_mma"},
        StreamCase{1500, false, 16, false, 1, "decode_mma"}, StreamCase{300, true, 16, false, 1, "decode_mma"}}) {
    const int max_len = k.tree ? 200 : 384;
    std::vector<int> lens(k.batch);
    for (int b = 0; b < k.batch; ++b) {
      lens[b] = b % 5 == 0 ? max_len : b % 5 == 1 ? 129 : b % 5 == 2 ? 3 : b % 5 == 3 ? 0 : 200;
    }
    testing::DecodeSpecBuilder spec =
        testing::DecodeSpecBuilder(k.batch, 64, 8, max_len).head_dim(64).queries(k.q_len, true).lens(lens);
    if (k.page_size > 0) spec.paged(k.page_size);
    const Variants variants = k.tree ? Variants{0.f, -1, -1, k.sinks, true} : Variants{0.f, 128, -1, k.sinks};
    testing::DecodeCase c = testing::make_decode_case(with(spec, variants, 2.f));
    PlanOptions o;
    o.tuning.decode_stream = true;
    o.family = k.family;
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
    if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
    if (plan.persistent_blocks() == 0) GTEST_SKIP() << "this device's plan takes no stream kernel: " << describe(plan);
    if (*k.family) ASSERT_EQ(plan.family(), k.family);
    ASSERT_TRUE(gpu_test::run_decode_case(plan, c));
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << "B=" << k.batch << " q_len " << k.q_len << " page " << k.page_size
                            << (k.tree ? " tree" : "") << ": "
                            << cmp.summary() << "\n" << describe(plan);
  }
}

// Both stream kernels (the 32-row tile's for q_len 4, the 16-row tile's for q_len 1) over bad
// device data: a length past the cache's capacity (sequence 0) and a page id past the pool inside
// the window (sequence 2) give NaN in those sequences only; every other sequence keeps the bits of
// a clean run.
TEST(DecodeVariantsGpu, TheStreamKernelsPoisonOnlyTheSequencesWithBadData) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 64);
  for (int q_len : {4, 1}) {
    const int batch = 256, max_len = 384;
    testing::DecodeCase c = testing::make_decode_case(
        with(testing::DecodeSpecBuilder(batch, 64, 8, max_len).head_dim(64).queries(q_len, true).paged(16).lens(
                 std::vector<int>(batch, max_len)),
             Variants{0.f, 128, -1, true}, 2.f));
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), PlanOptions{}, &plan).ok());
    if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
    if (plan.persistent_blocks() == 0) GTEST_SKIP() << "this device's plan takes no stream kernel: " << describe(plan);
    ASSERT_TRUE(gpu_test::run_decode_case(plan, c));
    ASSERT_TRUE(testing::check_decode(c).passed) << "q_len " << q_len;
    const std::vector<uint16_t> clean = c.out;

    DeviceDecodeCase dev(c);
    dev.tensors.seq_lens_host = nullptr;  // the host cannot see what the device will read
    dev.tensors.block_table_host = nullptr;
    std::vector<int32_t> lens(c.seq_lens.begin(), c.seq_lens.end());
    lens[0] = int(c.max_pages) * 16 + 1;  // past the cache
    dev.upload_seq_lens(lens);
    std::vector<int32_t> table = c.block_table;
    table[size_t(2 * c.max_pages + (max_len - 1) / 16)] = 1 << 20;  // the last page: inside the window
    dev.block_table.upload(table.data(), table.size() * sizeof(int32_t));
    testing::poison_outputs(c);
    dev.upload_outputs(c);
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    ASSERT_TRUE(run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dev.download_outputs(c);
    const size_t per_seq = size_t(q_len) * c.problem.num_q_heads * c.problem.head_dim;
    ASSERT_EQ(c.out.size(), batch * per_seq) << "dense outputs, a sequence's rows together";
    for (int b = 0; b < batch; ++b) {
      int64_t nan = 0, changed = 0;
      for (size_t e = b * per_seq; e < (b + 1) * per_seq; ++e) {
        nan += std::isnan(detail::half_bits_to_float(c.out[e], DType::kBF16));
        changed += c.out[e] != clean[e];
      }
      if (b == 0 || b == 2) {
        EXPECT_EQ(nan, int64_t(per_seq)) << "q_len " << q_len << ": sequence " << b << " has bad device data";
      } else {
        EXPECT_EQ(changed, 0) << "q_len " << q_len << ": sequence " << b << " is healthy";
      }
    }
  }
}

// A *_kc cache's default route (chunked prefill over the dequantized copy), and speculative rows the
// planner sends to chunked prefill, take the window, the softcap, sinks and the tree mask to the
// prefill kernels' variants instances: against the reference, and binding.
TEST(DecodeVariantsGpu, TheChunkedPrefillRouteServesThem) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  using B = testing::DecodeSpecBuilder;
  struct RouteCase {
    testing::DecodeCaseSpec spec;
    const char* what;
    const char* family;  // a 16-bit cache goes to chunked prefill when a prefill family is named
  };
  const Variants tree{0.f, -1, -1, false, true};
  for (const RouteCase& k : {
           RouteCase{with(B(2, 32, 8, 1000).format(KvFormat::kInt4Kc).lens({1000, 70}), Variants{2.f}),
                     "int4_kc softcap 2", ""},
           RouteCase{with(B(2, 32, 8, 1000).format(KvFormat::kInt8Kc).lens({1000, 130}), Variants{0.f, 64}),
                     "int8_kc window 64", ""},
           RouteCase{with(B(2, 32, 8, 2000).format(KvFormat::kK8V4Kc).queries(4, true).paged(64).lens({2000, 300}),
                          Variants{1.f, 100}),
                     "k8v4_kc q_len 4 window 100 softcap 1", ""},
           RouteCase{with(B(3, 32, 8, 3000).queries(8, true).paged(16).lens({3000, 500, 9}), Variants{2.f, 200}),
                     "bf16 paged 16 q_len 8 window 200 softcap 2", "prefill_sm90"},
           RouteCase{with(B(3, 32, 8, 2000).queries(16, true).paged(16).lens({2000, 40, 9}), tree),
                     "bf16 paged 16 q_len 16 tree", "prefill_sm90_gqa64"},
           RouteCase{with(B(2, 32, 8, 1000).format(KvFormat::kInt8Kc).queries(8, true).lens({1000, 30}), tree),
                     "int8_kc q_len 8 tree", ""},
           RouteCase{with(B(2, 32, 8, 1500).queries(6, true).lens({1500, 20}), Variants{1.f, 300, -1, false, true}),
                     "bf16 q_len 6 tree window 300 softcap 1", "prefill_sm90_gqa"},
           RouteCase{with(B(2, 32, 8, 1000).format(KvFormat::kInt4Kc).queries(4, true).lens({1000, 70}),
                          Variants{0.f, 128, -1, true}),
                     "int4_kc q_len 4 window 128 sinks", ""},
           RouteCase{with(B(3, 32, 8, 2000).queries(8, true).paged(16).lens({2000, 40, 0}), Variants{0.f, -1, -1, true}),
                     "bf16 paged 16 q_len 8 sinks", "prefill_sm90_gqa64"},
           // q_scale 1: a softmax whose LSE is near the sinks' logits, so that they weigh.
           RouteCase{with(B(2, 16, 16, 1200).queries(3, true).lens({1200, 33}), Variants{0.f, -1, -1, true}, 1.f),
                     "bf16 q_len 3 MHA sinks", "prefill_mma"}}) {
    const std::string what = std::string(k.what) + (*k.family ? std::string(" on ") + k.family : "");
    testing::DecodeCase c = testing::make_decode_case(k.spec);
    PlanOptions o;
    o.family = k.family;
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
    ASSERT_TRUE(plan.decode_via_prefill()) << what << ": " << describe(plan);
    if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
    ASSERT_TRUE(gpu_test::run_decode_case(plan, c)) << what;
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << what << " (" << plan.family() << "): " << cmp.summary();
    testing::DecodeCase plain = c;
    plain.problem.softcap = 0.f;
    plain.problem.window_left = plain.problem.window_right = -1;
    plain.problem.tree_mask = false;
    plain.problem.sinks = false;
    EXPECT_FALSE(testing::check_decode(plain).passed) << what << ": the variants did not change the answer";
  }
}

// The planner's own route for a tree: speculative rows that overflow the 32-row decode tile go to
// chunked prefill with their tree mask (docs/TUNING.md), as the same rows without it.
TEST(DecodeVariantsGpu, TreeRowsTakeThePrefillRoute) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c = testing::make_decode_case(
      with(testing::DecodeSpecBuilder(4, 32, 8, 8192).queries(16, true).lens({8192, 5000, 16, 3}),
           Variants{0.f, -1, -1, false, true}));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), {}, &plan).ok());
  if (gpu_test::device().cc_major < 9) GTEST_SKIP() << "the route is planned on sm_90 only";
  if (!gpu_test::kind_compiled("prefill", "sm90a", DType::kBF16, 128)) {
    GTEST_SKIP() << "not compiled into this build: an sm_90a prefill family at bf16 D=128 (the route's)";
  }
  ASSERT_TRUE(plan.decode_via_prefill()) << describe(plan);
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
  ASSERT_TRUE(gpu_test::run_decode_case(plan, c));
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << describe(plan) << cmp.summary();
  testing::DecodeCase plain = c;
  plain.problem.tree_mask = false;
  EXPECT_FALSE(testing::check_decode(plain).passed) << "the tree mask did not change the answer";
}

// A tree mask that hides every draft leaves each query the prefix (a sequence of no more keys than
// drafts: no key at all, O = 0, LSE = -inf), on the decode kernels and on the chunked-prefill route
// (a *_kc cache's default).
TEST(DecodeVariantsGpu, ATreeMaskThatHidesEveryDraftLeavesThePrefix) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  using B = testing::DecodeSpecBuilder;
  testing::DecodeCase c = testing::make_decode_case(
      with(B(3, 32, 8, 2000).queries(4, true).lens({2000, 4, 3}), Variants{0.f, -1, -1, false, true}));
  std::fill(c.tree_mask.begin(), c.tree_mask.end(), uint8_t(0));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), {}, &plan).ok());
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
  ASSERT_TRUE(gpu_test::run_decode_case(plan, c));
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << describe(plan) << cmp.summary();

  testing::DecodeCase kc = testing::make_decode_case(
      with(B(2, 32, 8, 1000).format(KvFormat::kInt4Kc).queries(4, true).lens({1000, 70}), Variants{0.f, -1, -1, false, true}));
  Plan routed;
  ASSERT_TRUE(plan_decode(kc.problem, gpu_test::device(), {}, &routed).ok());
  ASSERT_TRUE(routed.decode_via_prefill()) << describe(routed);
  std::fill(kc.tree_mask.begin(), kc.tree_mask.end(), uint8_t(0));
  if (!gpu_test::plan_compiled(routed)) GTEST_SKIP() << "not compiled into this build: " << routed.family();
  ASSERT_TRUE(gpu_test::run_decode_case(routed, kc));
  const testing::Comparison kc_cmp = testing::check_decode(kc);
  EXPECT_TRUE(kc_cmp.passed) << describe(routed) << kc_cmp.summary();
}

// Windows move with each sequence's length: one captured call serves new lengths, and a sequence's
// bits do not depend on the batch around it in batch-invariant mode.
TEST(DecodeVariantsGpu, AWindowedGraphReplaysWithNewLengths) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c =
      testing::make_decode_case(with(testing::DecodeSpecBuilder(3, 32, 8, 8192), Variants{1.f, 1000}));
  PlanOptions o;
  o.max_splits = 16;
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  const gpu_test::CapturedCall graph(
      [&](cudaStream_t stream) { return run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), stream); });
  ASSERT_TRUE(graph.ok()) << graph.error();
  for (const std::vector<int32_t>& lens : {std::vector<int32_t>{8192, 100, 5000}, {1, 8191, 0}, {1001, 999, 1000}}) {
    gpu_test::expect_replay_with_lengths(graph, dev, c, lens);
  }
}

TEST(DecodeVariantsGpu, AWindowKeepsBatchInvariantBits) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (KvFormat f : {KvFormat::kNative, KvFormat::kInt4}) {
    using B = testing::DecodeSpecBuilder;
    PlanOptions o;
    o.split_tokens = 256;
    if (!gpu_test::check_batch_invariant_bits(
            testing::make_decode_case(with(B(1, 32, 8, 3000).format(f), Variants{0.f, 900})),
            testing::make_decode_case(with(B(3, 32, 8, 20000).format(f).lens({20000, 3000, 7}), Variants{0.f, 900})), 1,
            o, to_string(f))) {
      GTEST_SKIP() << "not compiled into this build: " << to_string(f);
    }
  }
}

}  // namespace
}  // namespace splitkv
