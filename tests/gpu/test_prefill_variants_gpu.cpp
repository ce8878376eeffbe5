// The logit softcap and the sliding window in prefill on the GPU (docs/VARIANTS.md): the one-pass
// kernels' variants instances (prefill_mma, prefill_mma_k16v64, prefill_sm90 and its tile variants,
// GQA-packed tiles), padded and varlen, causal and not, forced KV splits, against the fp64
// reference with outputs and workspace poisoned. Windows of 0, narrower than a tile, wider than the
// context, with a right side, on chunks whose queries sit at the end of longer keys, and rows that
// see no key; caps that bind hard (1) and Gemma's 50. Each binding case also checks that the variant
// changed the answer (the output against the reference without it must fail). Sinks (random
// logits in [-3, 8] per head, a softmax of q_scale 1 so that they weigh) folded by the kernels into
// final rows and by the combine after KV splits, alone and with the window (gpt-oss), on rows that
// see no key (O = 0, LSE = the sink); a decode problem on the chunked-prefill route with sinks.
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

struct Variants {
  float cap = 0.f;
  int left = -1, right = -1;
  bool sinks = false;
};

struct PrefillVariantCase {
  std::string name;
  testing::PrefillCaseSpec spec;
  bool binds = true;  // the variants change the answer
};

// A spec with the variants and a peaked softmax (q_scale 6), or with sinks one whose LSE is near
// the sinks' logits (q_scale 1).
testing::PrefillCaseSpec with(testing::PrefillCaseSpec s, Variants v) {
  s.problem.softcap = v.cap;
  s.problem.window_left = v.left;
  s.problem.window_right = v.right;
  s.problem.sinks = v.sinks;
  s.q_scale = v.sinks ? 1.f : 6.f;
  return s;
}

testing::PrefillCaseSpec padded(int batch, int hq, int hkv, int lq, int lk, bool causal, Variants v, int d = 128,
                                DType dtype = DType::kBF16) {
  return with(testing::padded_prefill_spec(batch, hq, hkv, lq, lk, causal, d, dtype), v);
}

testing::PrefillCaseSpec varlen(int hq, int hkv, std::vector<int> q_lens, std::vector<int> kv_lens, bool causal,
                                Variants v, int d = 128) {
  return with(testing::varlen_prefill_spec(hq, hkv, std::move(q_lens), std::move(kv_lens), causal, d), v);
}

std::vector<PrefillVariantCase> cases() {
  std::vector<PrefillVariantCase> c;
  c.push_back({"cap1_causal_1000", padded(1, 4, 2, 1000, 1000, true, {1.f})});
  c.push_back({"cap50_dense_300", padded(2, 4, 4, 300, 300, false, {50.f}), true});
  c.push_back({"win64_causal_1000", padded(1, 4, 2, 1000, 1000, true, {0.f, 64, 0})});
  c.push_back({"win0_causal_300", padded(1, 4, 4, 300, 300, true, {0.f, 0, 0})});
  c.push_back({"win200_causal_4097", padded(1, 2, 2, 4097, 4097, true, {0.f, 200, -1})});
  c.push_back({"win_wider_than_context", padded(1, 4, 4, 129, 129, true, {0.f, 5000, -1}), false});
  c.push_back({"win_both_sides_dense", padded(2, 4, 2, 333, 333, false, {0.f, 100, 37})});
  c.push_back({"win_right_only_dense", padded(1, 4, 4, 200, 257, false, {0.f, -1, 10})});
  c.push_back({"win100_chunk_129_of_700", padded(2, 4, 4, 129, 700, true, {0.f, 100, -1})});
  c.push_back({"win30_rows_see_nothing", padded(1, 4, 4, 200, 65, true, {0.f, 30, -1})});
  c.push_back({"win80_cap2_gqa_32_8", padded(1, 32, 8, 300, 300, true, {2.f, 80, -1})});
  c.push_back({"win50_gqa_12_1_chunk_45", padded(2, 12, 1, 45, 300, true, {0.f, 50, -1})});
  c.push_back({"win64_hd64_fp16", padded(1, 6, 3, 500, 520, true, {0.f, 64, -1}, 64, DType::kF16)});
  c.push_back({"win300_hd256_causal_1041", padded(1, 2, 2, 1041, 1041, true, {0.f, 300, -1}, 256)});
  c.push_back({"cap1_hd256_fp16", padded(1, 4, 4, 200, 333, true, {1.f}, 256, DType::kF16)});
  c.push_back({"win40_varlen_causal", varlen(8, 2, {1, 64, 129, 0, 250}, {1, 200, 129, 7, 250}, true, {0.f, 40, -1})});
  c.push_back({"win40_cap3_varlen_dense", varlen(4, 2, {100, 0, 17, 300}, {130, 5, 0, 300}, false, {3.f, 40, 40})});
  const Variants sinks{0.f, -1, -1, true};
  c.push_back({"sinks_causal_1000", padded(1, 4, 2, 1000, 1000, true, sinks)});
  c.push_back({"sinks_dense_300", padded(2, 4, 4, 300, 300, false, sinks)});
  c.push_back({"sinks_rows_see_nothing", padded(1, 4, 4, 200, 65, true, sinks)});
  c.push_back({"sinks_gqa_32_8_chunk_45", padded(2, 32, 8, 45, 700, true, sinks)});
  c.push_back({"sinks_win128_gqa_16_2_hd64", padded(1, 16, 2, 400, 400, true, {0.f, 128, 0, true}, 64)});
  c.push_back({"sinks_cap30_hd256", padded(1, 2, 2, 300, 300, true, {30.f, -1, -1, true}, 256)});
  c.push_back({"sinks_varlen_causal", varlen(8, 2, {1, 64, 129, 0, 250}, {1, 200, 129, 7, 250}, true, sinks)});
  return c;
}

struct Family {
  const char* name;
  const char* family;  // "": the planner's
  int num_splits;
};
const Family kFamilies[] = {{"default", "", 0},
                            {"splitkv3", "", 3},
                            {"sm90", "prefill_sm90", 0},
                            {"sm90_gqa", "prefill_sm90_gqa", 0},
                            {"sm90_v64", "prefill_sm90_v64", 0},
                            {"sm90_m192", "prefill_sm90_m192", 0},
                            {"sm90_n80", "prefill_sm90_n80", 0},
                            {"mma", "prefill_mma", 0},
                            {"mma_splitkv2", "prefill_mma", 2},
                            {"k16v64", "prefill_mma_k16v64", 0}};

struct Param {
  PrefillVariantCase c;
  Family f;
};

std::vector<Param> params() {
  std::vector<Param> out;
  for (const PrefillVariantCase& c : cases())
    for (const Family& f : kFamilies)
      if (gpu_test::prefill_family_serves(f.family, c.spec.problem)) out.push_back({c, f});
  return out;
}

class PrefillVariantsVsReference : public ::testing::TestWithParam<Param> {};

TEST_P(PrefillVariantsVsReference, MatchesFp64ReferenceAndTheVariantsBind) {
  const Param& param = GetParam();
  SPLITKV_REQUIRE_GPU(param.c.spec.problem.dtype, param.c.spec.problem.head_dim);
  PlanOptions o;
  o.family = param.f.family;
  o.num_splits = param.f.num_splits;
  if (o.num_splits > 1) o.strategy = Strategy::kSplitKV;
  testing::PrefillCase c = testing::make_prefill_case(param.c.spec);
  Plan plan;
  Status s = plan_prefill(c.problem, gpu_test::device(), o, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  SPLITKV_REQUIRE_PLAN_COMPILED(plan);
  testing::DevicePrefillCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(gpu_test::run_prefill_poisoned(plan, c, dev, workspace));
  const testing::Comparison cmp = testing::check_prefill(c);
  EXPECT_TRUE(cmp.passed) << plan.family() << " splits=" << plan.num_splits() << ": " << cmp.summary();
  if (param.c.binds) {  // the same output against the reference without the variants must fail
    const PrefillProblem with = c.problem;
    c.problem.softcap = 0.f;
    c.problem.window_left = c.problem.window_right = -1;
    c.problem.sinks = false;
    EXPECT_FALSE(testing::check_prefill(c).passed) << "the variants did not change the answer";
    c.problem = with;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PrefillVariantsVsReference, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return info.param.c.name + "_" + info.param.f.name;
                         });

}  // namespace
}  // namespace splitkv
