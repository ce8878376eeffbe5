// The logit softcap on the GPU (docs/VARIANTS.md): every decode family transforms its raw scores
// before the masks (kernels/common/score_softcap.cuh), in the units the kernel keeps them (Q's
// shift, an FP8 cache's key scale, a *_kc group's fold). Checked against the fp64 reference, outputs
// and workspace poisoned: the 16-bit families of 8, 16 and 32 packed rows, the quantized families
// of each format, the *_kc decode kernel, D 64 / 128 / 256, paged caches, forced and batch-invariant
// splits, the cluster, fused and combine-kernel merges, a cap that binds hard (1) and Gemma's 50.
// Each case also checks that the cap changed the answer: the same output against the reference
// without the cap must fail (a test that cannot fail is a defect). A plan that runs chunked prefill
// refuses the softcap by name.
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;
using testing::DeviceDecodeCase;

struct SoftcapCase {
  std::string name;
  testing::DecodeCaseSpec spec;
  std::string family;  // empty: the planner's
  int num_splits = 0;
  int split_tokens = 0;
  Merge merge = Merge::kAuto;
};

testing::DecodeCaseSpec capped(testing::DecodeSpecBuilder b, float cap, float q_scale) {
  b.spec.problem.softcap = cap;
  b.spec.q_scale = q_scale;
  return b.spec;
}

std::vector<SoftcapCase> softcap_cases() {
  using B = testing::DecodeSpecBuilder;
  std::vector<SoftcapCase> c;
  // 16-bit caches: decode_mma_n8 (<= 8 rows), decode_mma (16), decode_mma_m32 (32).
  c.push_back({"n8_cap1", capped(B(2, 32, 8, 3000).lens({3000, 17}), 1.f, 8.f), "decode_mma_n8", 5});
  c.push_back({"n8_cap50_peaked", capped(B(2, 32, 8, 3000).lens({3000, 0}), 50.f, 40.f), "decode_mma_n8"});
  c.push_back({"m16_q4_causal_paged16", capped(B(2, 32, 8, 2000).queries(4, true).paged(16).lens({2000, 9}), 1.f, 8.f),
               "decode_mma"});
  c.push_back({"m32_q8_causal", capped(B(2, 32, 8, 3000).queries(8, true).lens({3000, 100}), 2.f, 8.f), "decode_mma_m32",
               3});
  c.push_back({"mha_d256", capped(B(1, 8, 8, 1500).head_dim(256), 1.f, 8.f), "", 4});
  c.push_back({"fp16_d64_gqa8", capped(B(3, 64, 8, 4096).head_dim(64).dtype(DType::kF16).lens({4096, 128, 1}), 1.f, 8.f),
               ""});
  c.push_back({"batch_invariant", capped(B(3, 32, 8, 5000).lens({5000, 64, 0}), 1.f, 8.f), "", 0, 512});
  c.push_back({"cluster_merge", capped(B(1, 32, 8, 8000), 1.f, 8.f), "", 8, 0, Merge::kCluster});
  c.push_back({"fused_merge", capped(B(2, 32, 8, 8000).lens({8000, 300}), 1.f, 8.f), "", 6, 0, Merge::kFused});
  // Quantized caches: decode_quant (16 rows) and decode_quant_n8 per format, the *_kc kernel.
  c.push_back({"fp8_q4_causal", capped(B(2, 32, 8, 3000).format(KvFormat::kFP8E4M3).queries(4, true).lens({3000, 70}),
                                      1.f, 8.f),
               "decode_quant"});
  c.push_back({"fp8_n8", capped(B(2, 32, 8, 3000).format(KvFormat::kFP8E4M3).lens({3000, 70}), 1.f, 8.f),
               "decode_quant_n8", 3});
  c.push_back({"int8_n8_paged64", capped(B(2, 32, 8, 3000).format(KvFormat::kInt8).paged(64).lens({3000, 70}), 1.f, 8.f),
               "decode_quant_n8"});
  c.push_back({"int4_n8_splits", capped(B(2, 32, 8, 5000).format(KvFormat::kInt4).lens({5000, 33}), 1.f, 8.f),
               "decode_quant_n8", 7});
  c.push_back({"int4_q4_causal", capped(B(2, 32, 8, 3000).format(KvFormat::kInt4).queries(4, true).lens({3000, 5}), 1.f,
                                       8.f),
               "decode_quant"});
  c.push_back({"k8v4_n8", capped(B(2, 32, 8, 3000).format(KvFormat::kK8V4).lens({3000, 200}), 2.f, 8.f),
               "decode_quant_n8"});
  c.push_back({"int4_kc_kernel", capped(B(3, 32, 8, 2000).format(KvFormat::kInt4Kc).lens({2000, 65, 63}), 1.f, 8.f),
               "decode_kc_n8"});
  c.push_back({"int8_kc_kernel_splits", capped(B(2, 32, 8, 3000).format(KvFormat::kInt8Kc).lens({3000, 700}), 1.f, 8.f),
               "decode_kc_n8", 6});
  return c;
}

class SoftcapVsReference : public ::testing::TestWithParam<SoftcapCase> {};

TEST_P(SoftcapVsReference, MatchesFp64ReferenceAndTheCapBinds) {
  const SoftcapCase& k = GetParam();
  SPLITKV_REQUIRE_GPU(k.spec.problem.dtype, k.spec.problem.head_dim);
  testing::DecodeCase c = testing::make_decode_case(k.spec);
  PlanOptions o;
  o.family = k.family;
  o.num_splits = k.num_splits;
  o.split_tokens = k.split_tokens;
  o.merge = k.merge;
  Plan plan;
  const Status planned = plan_decode(c.problem, gpu_test::device(), o, &plan);
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
  testing::DecodeCase uncapped = c;
  uncapped.problem.softcap = 0.f;
  EXPECT_FALSE(testing::check_decode(uncapped).passed) << what << ": the cap did not change the answer";
}

INSTANTIATE_TEST_SUITE_P(Cases, SoftcapVsReference, ::testing::ValuesIn(softcap_cases()),
                         [](const ::testing::TestParamInfo<SoftcapCase>& info) { return info.param.name; });

// The same bits twice, and the softcap instance is not the plain one: a cap large enough to leave
// every score as it is (1e30) gives the plain kernel's answer to within rounding, not its bits
// necessarily, so only the reference is asked.
TEST(SoftcapGpu, AHugeCapIsTheUncappedAnswer) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c = testing::make_decode_case(capped(testing::DecodeSpecBuilder(2, 32, 8, 3000), 1e30f, 8.f));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), PlanOptions{}, &plan).ok());
  if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << plan.family();
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  dev.download_outputs(c);
  testing::DecodeCase uncapped = c;
  uncapped.problem.softcap = 0.f;
  const testing::Comparison cmp = testing::check_decode(uncapped);
  EXPECT_TRUE(cmp.passed) << cmp.summary();
}

// A *_kc cache's default route (chunked prefill over the dequantized copy) has no softcap yet:
// run_decode names it; the decode kernel (options.family) serves it (SoftcapVsReference).
TEST(SoftcapGpu, TheChunkedPrefillRouteRefusesItByName) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c = testing::make_decode_case(
      capped(testing::DecodeSpecBuilder(2, 32, 8, 1000).format(KvFormat::kInt4Kc), 30.f, 1.f));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), PlanOptions{}, &plan).ok());
  ASSERT_TRUE(plan.decode_via_prefill()) << describe(plan);
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  const Status s = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  EXPECT_EQ(s.argument(), "softcap") << s.message();
}

}  // namespace
}  // namespace splitkv
