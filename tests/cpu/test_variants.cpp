// Attention variants (docs/VARIANTS.md): sliding window, logit softcap, per-head sinks and tree masks.
// The fp64 reference is checked against a direct transcription of each definition; the CPU backend
// against the reference on random cases (splits, pages, GQA, speculative rows); edge cases and the
// API's checks by name; the GPU entry points refuse the variants by name until kernels serve them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/host_tensor.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/split_rule.hpp"
#include "plan/geometry.hpp"
#include "cpu/cpu_backend.hpp"
#include "reference/reference.hpp"
#include "splitkv/splitkv.hpp"
#include "testing/decode_check.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv {
namespace {

using detail::element_offset;
using detail::load_float;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Variants {
  int left = -1, right = -1;
  float softcap = 0.f;
  bool sinks = false, tree = false;
};

testing::DecodeCaseSpec spec_with(testing::DecodeSpecBuilder b, const Variants& v) {
  b.spec.problem.window_left = v.left;
  b.spec.problem.window_right = v.right;
  b.spec.problem.softcap = v.softcap;
  b.spec.problem.sinks = v.sinks;
  b.spec.problem.tree_mask = v.tree;
  return b.spec;
}

// Row (b, i, hq) of a contiguous 16-bit case, straight from the definitions: query i at position
// p = len - q_len + i sees key j when p - left <= j (left >= 0), j <= p + right (right >= 0), j <= p
// when causal unless j is a draft (j >= len - q_len) under a tree mask, whose bit then decides;
// scores s = q.k / sqrt(D), capped; the sink joins the denominator.
void direct_row(testing::DecodeCase& c, int b, int i, int hq, std::vector<double>* o, double* lse) {
  const DecodeProblem& p = c.problem;
  const DecodeTensors t = c.host_tensors();
  const int len = c.seq_lens[b], Lq = p.q_len, D = p.head_dim, hkv = hq / (p.num_q_heads / p.num_kv_heads);
  const long long pos = (long long)len - Lq + i;
  std::vector<double> s(size_t(len), -kInf);
  double m = -kInf;
  for (int j = 0; j < len; ++j) {
    const bool draft = j >= len - Lq;
    if (p.window_left >= 0 && j < pos - p.window_left) continue;
    if (p.window_right >= 0 && j > pos + p.window_right) continue;
    if (p.causal && j > pos && !(p.tree_mask && draft)) continue;
    if (p.tree_mask && draft) {
      const int bit = j - (len - Lq);
      const uint8_t byte = c.tree_mask[size_t((b * Lq + i) * ((Lq + 7) / 8) + bit / 8)];
      if (!((byte >> (bit % 8)) & 1)) continue;
    }
    double dot = 0;
    for (int d = 0; d < D; ++d) {
      dot += double(load_float(t.q, element_offset(t.q, b, i, hq, d))) *
             double(load_float(t.k, element_offset(t.k, b, j, hkv, d)));
    }
    double x = dot / std::sqrt(double(D));
    if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
    s[size_t(j)] = x;
    m = std::max(m, x);
  }
  const double sink = p.sinks ? double(c.sinks[size_t(hq)]) : -kInf;
  const double top = std::max(m, sink);
  o->assign(size_t(D), 0.0);
  if (top == -kInf) {
    *lse = -kInf;
    return;
  }
  double sum = sink == -kInf ? 0.0 : std::exp(sink - top);
  for (int j = 0; j < len; ++j) {
    if (s[size_t(j)] == -kInf) continue;
    const double w = std::exp(s[size_t(j)] - top);
    sum += w;
    for (int d = 0; d < D; ++d) (*o)[size_t(d)] += w * double(load_float(t.v, element_offset(t.v, b, j, hkv, d)));
  }
  for (double& x : *o) x /= sum;
  *lse = top + std::log(sum);
}

void expect_reference_is_the_definition(const testing::DecodeCaseSpec& spec) {
  testing::DecodeCase c = testing::make_decode_case(spec);
  const ref::Result r = ref::decode(c.problem, c.host_tensors());
  const DecodeProblem& p = c.problem;
  std::vector<double> o;
  double lse = 0;
  for (int b = 0; b < p.batch; ++b) {
    for (int i = 0; i < p.q_len; ++i) {
      for (int hq = 0; hq < p.num_q_heads; ++hq) {
        direct_row(c, b, i, hq, &o, &lse);
        const double got_lse = r.lse[(size_t(b) * p.num_q_heads + hq) * p.q_len + i];
        if (std::isinf(lse)) {
          EXPECT_EQ(got_lse, lse) << "b " << b << " i " << i << " hq " << hq;
        } else {
          EXPECT_NEAR(got_lse, lse, 1e-9 * std::max(1.0, std::fabs(lse))) << "b " << b << " i " << i << " hq " << hq;
        }
        for (int d = 0; d < p.head_dim; ++d) {
          const double got = r.out[((size_t(b) * p.q_len + i) * p.num_q_heads + hq) * p.head_dim + d];
          ASSERT_NEAR(got, o[size_t(d)], 1e-9) << "b " << b << " i " << i << " hq " << hq << " d " << d;
        }
      }
    }
  }
}

TEST(VariantReference, IsTheDefinition) {
  const testing::DecodeSpecBuilder base = testing::DecodeSpecBuilder(3, 4, 2, 300).head_dim(64).lens({300, 40, 7});
  testing::DecodeSpecBuilder spec4 = base;
  spec4.queries(4, true);
  testing::DecodeSpecBuilder spec16 = testing::DecodeSpecBuilder(2, 4, 2, 100).head_dim(64).lens({100, 16});
  spec16.queries(16, true);
  testing::DecodeSpecBuilder full4 = base;
  full4.queries(4, false);
  for (const Variants& v : {Variants{32, -1}, Variants{0, -1}, Variants{1000, -1}, Variants{-1, -1, 5.f},
                            Variants{-1, -1, 0.f, true}, Variants{50, -1, 2.f, true}}) {
    expect_reference_is_the_definition(spec_with(base, v));
    expect_reference_is_the_definition(spec_with(spec4, v));
  }
  expect_reference_is_the_definition(spec_with(full4, Variants{20, 3}));     // both sides, not causal
  expect_reference_is_the_definition(spec_with(full4, Variants{-1, 0}));     // right 0: causal by window
  expect_reference_is_the_definition(spec_with(spec4, Variants{-1, -1, 0.f, false, true}));
  expect_reference_is_the_definition(spec_with(spec16, Variants{30, -1, 3.f, true, true}));
}

// The CPU backend runs the split-KV algorithm with the variants (window bounds per split, sink at the
// final merge) and meets the reference by the GPU kernels' rule.
TEST(VariantCpuBackend, MatchesReference) {
  struct Case {
    testing::DecodeSpecBuilder b;
    Variants v;
    int splits, split_tokens;
  };
  testing::DecodeSpecBuilder paged = testing::DecodeSpecBuilder(3, 8, 2, 1000).head_dim(64).paged(16).lens({1000, 1, 0});
  testing::DecodeSpecBuilder spec = testing::DecodeSpecBuilder(2, 8, 2, 700).head_dim(64).lens({700, 77});
  spec.queries(8, true);
  testing::DecodeSpecBuilder gqa = testing::DecodeSpecBuilder(2, 32, 8, 2000).lens({2000, 300});
  for (const Case& k : {Case{paged, {128, -1}, 4, 0}, Case{paged, {1, -1, 30.f}, 3, 0},
                        Case{paged, {-1, -1, 0.f, true}, 5, 0}, Case{spec, {100, -1, 0.f, true, true}, 3, 0},
                        Case{spec, {0, -1}, 2, 0}, Case{gqa, {300, -1, 50.f, true}, 0, 0},
                        Case{gqa, {4096, -1, 0.f, true}, 0, 256}}) {
    const testing::DecodeCaseSpec s = spec_with(k.b, k.v);
    PlanOptions o;
    o.num_splits = k.splits;
    o.split_tokens = k.split_tokens;
    Plan plan;
    ASSERT_TRUE(plan_decode(s.problem, DeviceInfo::h200(), o, &plan).ok());
    for (float q_scale : {1.f, 6.f}) {
      testing::DecodeCaseSpec scaled = s;
      scaled.q_scale = q_scale;
      testing::DecodeCase c = testing::make_decode_case(scaled);
      ASSERT_TRUE(cpu::run_decode(plan, c.host_tensors()).ok());
      const testing::Comparison cmp = testing::check_decode(c);
      EXPECT_TRUE(cmp.passed) << "window " << k.v.left << " softcap " << k.v.softcap << " sinks " << k.v.sinks
                              << " tree " << k.v.tree << " splits " << plan.num_splits() << ": " << cmp.summary();
    }
  }
}

// With a left window a sequence's splits cut only [base, len): base is the first query's first
// visible key rounded down to the window's start edge (a whole block where the keys are split or
// read per 64-key channel group, a 16-key sub-tile where one split reads them all), and the spans
// tile that range in order.
TEST(VariantSplits, SplitsCutOnlyTheKeysSomeQuerySees) {
  EXPECT_EQ(detail::window_start_edge(1, 0, 64, false), detail::kWindowStartKeys);
  EXPECT_EQ(detail::window_start_edge(1, 0, 64, true), 64);   // *_kc: 64-key channel groups
  EXPECT_EQ(detail::window_start_edge(1, 256, 64, false), 64);  // batch-invariant chunks
  EXPECT_EQ(detail::window_start_edge(2, 0, 128, false), 128);
  for (int len : {0, 1, 15, 16, 17, 63, 64, 65, 1000, 4097, 131072}) {
    for (int left : {-1, 0, 1, 127, 128, 4096}) {
      for (int q_len : {1, 4, 16}) {
        for (int after : {0, 100}) {
          for (int block : {64, 128}) {
            for (int splits : {1, 3, 8}) {
              const int first = detail::first_visible_key(len, after, q_len, left);
              const int edge = detail::window_start_edge(splits, 0, block, false);
              const int base = detail::split_base(first, edge);
              ASSERT_TRUE(base % edge == 0 && base <= first && first <= std::max(len, 0)) << len << " " << left;
              EXPECT_LT(first - base, edge) << len << " " << left;
              if (left < 0) EXPECT_EQ(base, 0);
              int next = base;
              for (int s = 0; s < splits; ++s) {
                const detail::SplitSpan span = detail::split_span_from(base, len, s, splits, 0, block);
                EXPECT_EQ(span.lo, next) << "len " << len << " left " << left << " split " << s;
                EXPECT_TRUE(span.lo == len || (span.lo - base) % block == 0);
                next = span.end;
              }
              EXPECT_EQ(next, len) << "len " << len << " left " << left << " q_len " << q_len;
            }
          }
        }
      }
    }
  }
}

// The planner splits the window, not the context: a 128k decode with a 4096-key window gets the
// splits of a decode over the window's keys, each a share of the window.
TEST(VariantSplits, ThePlannerSplitsTheWindowNotTheContext) {
  DecodeProblem wide = testing::DecodeSpecBuilder(1, 32, 8, 131072).spec.problem;
  wide.window_left = 4096;
  Plan windowed, short_context, whole;
  ASSERT_TRUE(plan_decode(wide, DeviceInfo::h200(), {}, &windowed).ok());
  DecodeProblem window_keys = wide;
  window_keys.window_left = -1;
  window_keys.max_kv_len = plan::decode_split_keys(wide, windowed.block_n());
  ASSERT_TRUE(plan_decode(window_keys, DeviceInfo::h200(), {}, &short_context).ok());
  EXPECT_EQ(windowed.num_splits(), short_context.num_splits());
  // ... and its merge: the short-rows cluster rule sees the window's keys, not the context's.
  EXPECT_EQ(windowed.cluster_combine(), short_context.cluster_combine());
  EXPECT_TRUE(windowed.cluster_combine()) << describe(windowed);
  EXPECT_EQ(windowed.workspace_bytes(), short_context.workspace_bytes());
  DecodeProblem no_window = wide;
  no_window.window_left = -1;
  ASSERT_TRUE(plan_decode(no_window, DeviceInfo::h200(), {}, &whole).ok());
  // Each split of the windowed plan holds a share of the window, not of the context.
  const int window_chunk = detail::split_chunk_keys(plan::decode_split_keys(wide, windowed.block_n()),
                                                    windowed.num_splits(), 0, windowed.block_n());
  const int whole_chunk = detail::split_chunk_keys(no_window.max_kv_len, whole.num_splits(), 0, whole.block_n());
  EXPECT_LT(window_chunk * 8, whole_chunk);
  EXPECT_GE(int64_t(window_chunk) * windowed.num_splits(), wide.window_left + wide.q_len);
}

ref::Result reference(testing::DecodeCase& c) { return ref::decode(c.problem, c.host_tensors()); }

TEST(VariantEdges, WindowLargerThanTheContextIsNoWindow) {
  testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(2, 4, 2, 200).head_dim(64).lens({200, 3});
  b.queries(4, true);
  testing::DecodeCase plain = testing::make_decode_case(b.spec);
  testing::DecodeCase wide = testing::make_decode_case(spec_with(b, Variants{1 << 20, 0}));
  const ref::Result x = reference(plain), y = reference(wide);
  EXPECT_EQ(x.out, y.out);
  EXPECT_EQ(x.lse, y.lse);
}

TEST(VariantEdges, CausalWindowOfOneKeySeesOnlyItsOwnPosition) {
  testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(1, 2, 1, 50).head_dim(64);
  b.queries(4, true);
  testing::DecodeCase c = testing::make_decode_case(spec_with(b, Variants{0, -1}));
  const ref::Result r = reference(c);
  const DecodeTensors t = c.host_tensors();
  for (int i = 0; i < 4; ++i) {
    for (int d = 0; d < 64; ++d) {
      EXPECT_EQ(r.out[((size_t(i)) * 2 + 1) * 64 + d], double(load_float(t.v, element_offset(t.v, 0, 46 + i, 0, d))));
    }
  }
}

TEST(VariantEdges, SinksOfMinusInfinityChangeNothingAndHugeOnesTakeEverything) {
  const testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(2, 4, 2, 300).head_dim(64).lens({300, 0});
  testing::DecodeCase plain = testing::make_decode_case(b.spec);
  testing::DecodeCase sunk = testing::make_decode_case(spec_with(b, Variants{-1, -1, 0.f, true}));
  std::fill(sunk.sinks.begin(), sunk.sinks.end(), -std::numeric_limits<float>::infinity());
  const ref::Result x = reference(plain), y = reference(sunk);
  EXPECT_EQ(x.out, y.out);
  EXPECT_EQ(x.lse, y.lse);
  // A huge sink takes the whole softmax: O ~ 0, LSE = the sink; +inf: O = 0 exactly, LSE = +inf.
  sunk.sinks = {1e4f, std::numeric_limits<float>::infinity(), 1e4f, 1e4f};
  const ref::Result z = reference(sunk);
  for (int b2 = 0; b2 < 2; ++b2) {
    for (int h = 0; h < 4; ++h) {
      const double lse = z.lse[size_t(b2) * 4 + h];
      if (h == 1) {
        EXPECT_EQ(lse, kInf);
      } else {
        EXPECT_EQ(lse, 1e4);
      }
      for (int d = 0; d < 64; ++d) EXPECT_EQ(z.out[(size_t(b2) * 4 + h) * 64 + d], 0.0);
    }
  }
  // The CPU backend agrees (the empty sequence 1 too: O = 0, LSE = the sink).
  Plan plan;
  ASSERT_TRUE(plan_decode(sunk.problem, DeviceInfo::h200(), {}, &plan).ok());
  ASSERT_TRUE(cpu::run_decode(plan, sunk.host_tensors()).ok());
  EXPECT_EQ(sunk.lse[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(sunk.lse[4 + 0], 1e4f);
}

// A NaN sink (device data) makes that head's rows NaN, and only those.
TEST(VariantEdges, ANaNSinkIsNaNInItsHeadOnly) {
  testing::DecodeCase c = testing::make_decode_case(
      spec_with(testing::DecodeSpecBuilder(2, 4, 2, 300).head_dim(64).lens({300, 0}), Variants{-1, -1, 0.f, true}));
  c.sinks[1] = std::numeric_limits<float>::quiet_NaN();
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), PlanOptions{}, &plan).ok());
  ASSERT_TRUE(cpu::run_decode(plan, c.host_tensors()).ok());
  for (int b = 0; b < 2; ++b) {
    for (int h = 0; h < 4; ++h) EXPECT_EQ(std::isnan(c.lse[size_t(b) * 4 + h]), h == 1) << "b " << b << " h " << h;
  }
  const ref::Result r = reference(c);
  EXPECT_TRUE(std::isnan(r.lse[1]));
  EXPECT_FALSE(std::isnan(r.lse[0]));
}

TEST(VariantEdges, TreeMaskHidingEveryDraftLeavesThePrefix) {
  testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(2, 4, 2, 40).head_dim(64).lens({40, 8});
  b.queries(8, true);
  testing::DecodeCase c = testing::make_decode_case(spec_with(b, Variants{-1, -1, 0.f, false, true}));
  std::fill(c.tree_mask.begin(), c.tree_mask.end(), 0);
  const ref::Result r = reference(c);
  std::vector<double> o;
  double lse = 0;
  for (int i = 0; i < 8; ++i) {
    direct_row(c, 0, i, 0, &o, &lse);
    EXPECT_NEAR(r.lse[size_t(i)], lse, 1e-9);
    // Sequence 1 is all drafts: nothing visible, O = 0 and LSE = -inf.
    EXPECT_EQ(r.lse[(size_t(1) * 4) * 8 + i], -kInf);
  }
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  ASSERT_TRUE(cpu::run_decode(plan, c.host_tensors()).ok());
  EXPECT_TRUE(testing::check_decode(c).passed);
}

// ---- the API's checks ---------------------------------------------------------------------------

Status plan_status(const DecodeProblem& p) {
  Plan plan;
  return plan_decode(p, DeviceInfo::h200(), {}, &plan);
}

TEST(VariantValidation, BadValuesAreNamed) {
  DecodeProblem p = testing::DecodeSpecBuilder(1, 4, 2, 100).spec.problem;
  p.window_left = -2;
  EXPECT_EQ(plan_status(p).argument(), "window_left");
  p.window_left = -1;
  p.window_right = -5;
  EXPECT_EQ(plan_status(p).argument(), "window_right");
  p.window_right = 1;
  p.causal = true;
  p.q_len = 2;
  EXPECT_EQ(plan_status(p).argument(), "window_right");  // causal: -1 or 0
  p.window_right = 0;
  EXPECT_TRUE(plan_status(p).ok());
  for (float cap : {-1.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    p.softcap = cap;
    EXPECT_EQ(plan_status(p).argument(), "softcap");
  }
  PrefillProblem f;
  f.batch = 1, f.num_q_heads = 4, f.num_kv_heads = 2, f.head_dim = 128, f.max_q_len = 10, f.max_kv_len = 10;
  f.window_left = -3;
  Plan plan;
  EXPECT_EQ(plan_prefill(f, DeviceInfo::h200(), {}, &plan).argument(), "window_left");
}

TEST(VariantValidation, SinksAndTreeMaskTensorsAreChecked) {
  testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(2, 4, 2, 100).head_dim(64);
  b.queries(4, true);
  testing::DecodeCase c = testing::make_decode_case(spec_with(b, Variants{-1, -1, 0.f, true, true}));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  auto argument = [&](const DecodeTensors& t) { return testing::argument_root(cpu::run_decode(plan, t)); };
  DecodeTensors t = c.host_tensors();
  EXPECT_TRUE(cpu::run_decode(plan, t).ok());
  t.sinks = TensorRef{};
  EXPECT_EQ(argument(t), "sinks");
  t = c.host_tensors();
  t.sinks.shape[0] = 3;
  EXPECT_EQ(argument(t), "sinks");
  t = c.host_tensors();
  t.tree_mask.shape[2] = 2;
  EXPECT_EQ(argument(t), "tree_mask");
  t = c.host_tensors();
  int32_t after[2] = {0, 0};
  t.keys_after = TensorRef::contiguous(after, DType::kI32, {2});
  EXPECT_EQ(argument(t), "tree_mask");
  // Tensors for variants the problem does not ask for are refused too.
  testing::DecodeCase plain = testing::make_decode_case(b.spec);
  Plan plain_plan;
  ASSERT_TRUE(plan_decode(plain.problem, DeviceInfo::h200(), {}, &plain_plan).ok());
  DecodeTensors extra = plain.host_tensors();
  extra.sinks = c.host_tensors().sinks;
  EXPECT_EQ(cpu::run_decode(plain_plan, extra).argument(), "sinks");
  extra = plain.host_tensors();
  extra.tree_mask = c.host_tensors().tree_mask;
  EXPECT_EQ(cpu::run_decode(plain_plan, extra).argument(), "tree_mask");
}

TEST(VariantValidation, SinksAreNotAddedToPartials) {
  testing::DecodeCase c = testing::make_decode_case(
      spec_with(testing::DecodeSpecBuilder(1, 4, 2, 100).head_dim(64), Variants{-1, -1, 0.f, true}));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  std::vector<float> po(size_t(plan.num_splits()) * 4 * 64), pl(size_t(plan.num_splits()) * 4);
  DecodeTensors t = c.host_tensors();
  t.out = t.lse = TensorRef{};
  t.partial_o = TensorRef::contiguous(po.data(), DType::kF32, {plan.num_splits(), 1, 4, 64});
  t.partial_lse = TensorRef::contiguous(pl.data(), DType::kF32, {plan.num_splits(), 1, 4});
  EXPECT_EQ(cpu::run_decode(plan, t).argument(), "sinks");
}

// The decode kernels serve every variant; the chunked-prefill route (a *_kc cache's default) carries
// the window, the softcap, sinks and the tree mask to its prefill problem (the one-pass kernels'
// variants instances).
TEST(VariantPlans, ChunkedPrefillRouteCarriesSinks) {
  testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(1, 4, 2, 100).head_dim(64).format(KvFormat::kInt4Kc);
  b.queries(2, true);
  testing::DecodeCase c = testing::make_decode_case(spec_with(b, Variants{-1, -1, 0.f, true}));
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  ASSERT_TRUE(plan.decode_via_prefill()) << describe(plan);
  EXPECT_TRUE(plan.prefill().sinks) << describe(plan);
}

// On chunked prefill the GQA-packed families take a tree mask over at most 64 drafts; a plan on
// another prefill family, or with more drafts, is refused by name before any device work.
TEST(VariantGpu, ChunkedPrefillTakesTreeMasksOnPackedTilesOnly) {
  for (const auto& [family, q_len] : {std::pair<const char*, int>{"prefill_sm90", 4}, {"prefill_mma", 4},
                                      {"prefill_sm90_gqa", 72}}) {
    testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(1, 8, 8, 200);
    b.queries(q_len, true);
    testing::DecodeCase c = testing::make_decode_case(spec_with(b, Variants{-1, -1, 0.f, false, true}));
    PlanOptions o;
    o.family = family;
    Plan plan;
    const Status planned = plan_decode(c.problem, DeviceInfo::h200(), o, &plan);
    if (!planned.ok()) continue;  // a family this build or shape does not take
    ASSERT_TRUE(plan.decode_via_prefill()) << describe(plan);
    const Status s = run_decode(plan, c.host_tensors(), nullptr, 0, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << family << ": " << s.message();
    EXPECT_EQ(s.argument(), "tree_mask") << family << ": " << s.message();
  }
}

// The planner's prefill route for wide speculative rows takes no softcap or window yet: such rows
// stay on the decode kernels, which serve them. A tree mask goes with its rows on the route.
TEST(VariantGpu, TheSoftcapAndWindowKeepSpeculativeRowsOnTheDecodeKernels) {
  DecodeProblem p;
  p.batch = 8, p.num_q_heads = 28, p.num_kv_heads = 4, p.head_dim = 128, p.max_kv_len = 8192;
  p.q_len = 8, p.causal = true;
  Plan routed, capped;
  ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), {}, &routed).ok());
  if (!routed.decode_via_prefill()) GTEST_SKIP() << "this build lacks the prefill route's families";
  p.softcap = 30.f;
  ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), {}, &capped).ok());
  EXPECT_FALSE(capped.decode_via_prefill()) << describe(capped);
  p.softcap = 0.f;
  p.window_left = 4096;
  Plan windowed;
  ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), {}, &windowed).ok());
  EXPECT_FALSE(windowed.decode_via_prefill()) << describe(windowed);
  p.window_left = -1;
  p.tree_mask = true;  // the route's prefill kernels' variants instances take it
  Plan tree;
  ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), {}, &tree).ok());
  EXPECT_TRUE(tree.decode_via_prefill()) << describe(tree);
  EXPECT_EQ(tree.family(), routed.family());
}

// Prefill plans with the softcap, the window or sinks: the one-pass kernels (two-pass and split-V
// refuse them by name), one KV split under a left window unless asked for more, no stream-K tail; a decode
// plan served by chunked prefill carries them to its prefill problem.
TEST(VariantPlans, PrefillPlansKeepTheVariantsOnTheOnePassKernels) {
  PrefillProblem f;
  f.batch = 1, f.num_q_heads = 16, f.num_kv_heads = 16, f.head_dim = 128, f.max_q_len = 16384, f.max_kv_len = 16384;
  f.causal = true;
  f.window_left = 4096;
  for (Strategy strategy : {Strategy::kTwoPass, Strategy::kSplitV}) {
    PlanOptions o;
    o.strategy = strategy;
    Plan plan;
    Status s = plan_prefill(f, DeviceInfo::h200(), o, &plan);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_EQ(s.argument(), "window_left") << s.message();
    PrefillProblem capped = f;
    capped.window_left = -1;
    capped.softcap = 30.f;
    s = plan_prefill(capped, DeviceInfo::h200(), o, &plan);
    EXPECT_EQ(s.argument(), "softcap") << s.message();
    PrefillProblem sunk = f;
    sunk.window_left = -1;
    sunk.sinks = true;
    s = plan_prefill(sunk, DeviceInfo::h200(), o, &plan);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_EQ(s.argument(), "sinks") << s.message();
  }
  Plan plan;
  ASSERT_TRUE(plan_prefill(f, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_EQ(plan.num_splits(), 1) << describe(plan);
  EXPECT_FALSE(plan.stream_k()) << describe(plan);
  PrefillProblem dense = f;  // non-causal, uniform tiles: a stream-K tail would be planned without the cap
  dense.causal = false;
  dense.window_left = -1;
  dense.max_q_len = dense.max_kv_len = 8192;
  dense.batch = 3;
  dense.softcap = 50.f;
  ASSERT_TRUE(plan_prefill(dense, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_FALSE(plan.stream_k()) << describe(plan);
  dense.softcap = 0.f;
  ASSERT_TRUE(plan_prefill(dense, DeviceInfo::h200(), {}, &plan).ok());
  const bool plain_stream_k = plan.stream_k();
  dense.sinks = true;  // folded in the kernels' epilogue: no stream-K merge after it
  ASSERT_TRUE(plan_prefill(dense, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_FALSE(plan.stream_k()) << describe(plan);
  EXPECT_TRUE(plain_stream_k) << "the shape no longer plans a stream-K tail: pick one that does";

  DecodeProblem d;
  d.batch = 2, d.num_q_heads = 32, d.num_kv_heads = 8, d.head_dim = 128, d.max_kv_len = 1000;
  d.kv_format = KvFormat::kInt4Kc;
  d.window_left = 64;
  d.softcap = 2.f;
  ASSERT_TRUE(plan_decode(d, DeviceInfo::h200(), {}, &plan).ok());
  ASSERT_TRUE(plan.decode_via_prefill()) << describe(plan);
  EXPECT_EQ(plan.prefill().window_left, 64);
  EXPECT_EQ(plan.prefill().softcap, 2.f);
}

// Prefill (padded token tensors, square and chunk-shaped, causal or not): the reference against the
// definitions, query i of Lq over Lk keys at position Lk - Lq + i.
TEST(VariantReference, PrefillIsTheDefinition) {
  struct Shape {
    int lq, lk;
    bool causal;
    Variants v;
  };
  for (const Shape& sh : {Shape{40, 40, true, {8, -1, 0.f, true}}, Shape{16, 100, true, {30, 0, 3.f, true}},
                          Shape{24, 50, false, {5, 7, 0.f, false}}, Shape{60, 30, true, {-1, -1, 10.f, true}}}) {
    testing::PrefillCaseSpec spec;
    PrefillProblem& p = spec.problem;
    p.batch = 2, p.num_q_heads = 4, p.num_kv_heads = 2, p.head_dim = 64, p.max_q_len = sh.lq, p.max_kv_len = sh.lk;
    p.causal = sh.causal, p.window_left = sh.v.left, p.window_right = sh.v.right, p.softcap = sh.v.softcap;
    p.sinks = sh.v.sinks;
    testing::PrefillCase c = testing::make_prefill_case(spec);
    const PrefillTensors t = c.host_tensors();
    const ref::Result r = ref::prefill(c.problem, t);
    for (int b = 0; b < 2; ++b) {
      for (int i = 0; i < sh.lq; ++i) {
        for (int hq = 0; hq < 4; ++hq) {
          const long long pos = (long long)sh.lk - sh.lq + i;
          std::vector<double> s(size_t(sh.lk), -kInf), o(64, 0.0);
          double m = -kInf;
          for (int j = 0; j < sh.lk; ++j) {
            if (sh.v.left >= 0 && j < pos - sh.v.left) continue;
            if (sh.v.right >= 0 && j > pos + sh.v.right) continue;
            if (sh.causal && j > pos) continue;
            double dot = 0;
            for (int d = 0; d < 64; ++d) {
              dot += double(load_float(t.q, element_offset(t.q, b, i, hq, d))) *
                     double(load_float(t.k, element_offset(t.k, b, j, hq / 2, d)));
            }
            double x = dot / 8.0;
            if (sh.v.softcap > 0) x = sh.v.softcap * std::tanh(x / sh.v.softcap);
            s[size_t(j)] = x;
            m = std::max(m, x);
          }
          const double sink = sh.v.sinks ? double(c.sinks[size_t(hq)]) : -kInf;
          const double top = std::max(m, sink);
          double sum = sink == -kInf ? 0.0 : std::exp(sink - top);
          for (int j = 0; j < sh.lk; ++j) {
            if (s[size_t(j)] == -kInf) continue;
            const double w = std::exp(s[size_t(j)] - top);
            sum += w;
            for (int d = 0; d < 64; ++d) o[size_t(d)] += w * double(load_float(t.v, element_offset(t.v, b, j, hq / 2, d)));
          }
          const double lse = top == -kInf ? -kInf : top + std::log(sum);
          const double got_lse = r.lse[(size_t(b) * 4 + hq) * sh.lq + i];
          if (std::isinf(lse)) {
            EXPECT_EQ(got_lse, lse);
          } else {
            EXPECT_NEAR(got_lse, lse, 1e-9 * std::max(1.0, std::fabs(lse))) << "lq " << sh.lq << " b " << b << " i " << i;
          }
          for (int d = 0; d < 64; ++d) {
            const double want = top == -kInf ? 0.0 : o[size_t(d)] / sum;
            ASSERT_NEAR(r.out[((size_t(b) * sh.lq + i) * 4 + hq) * 64 + d], want, 1e-9) << "lq " << sh.lq << " i " << i;
          }
        }
      }
    }
  }
}

// Sinks are served on the GPU by the combine kernel's or a cluster's merge after several splits
// (the merge the same problem without sinks plans) and by the decode kernel itself after one (no
// workspace); the fused and atomic merges, which fold nothing, are refused by name.
TEST(VariantGpu, SinksPlansMergeThroughTheCombineKernelOrFoldInTheKernel) {
  bool clustered = false;
  for (int max_len : {100, 300, 5000, 100000}) {
    testing::DecodeSpecBuilder b = testing::DecodeSpecBuilder(1, 8, 2, max_len).head_dim(64);
    DecodeProblem p = spec_with(b, Variants{-1, -1, 0.f, true}).problem;
    DecodeProblem plain_problem = p;
    plain_problem.sinks = false;
    Plan plan, plain;
    ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), {}, &plan).ok());
    ASSERT_TRUE(plan_decode(plain_problem, DeviceInfo::h200(), {}, &plain).ok());
    EXPECT_EQ(plan.cluster_combine(), plain.cluster_combine()) << describe(plan);
    EXPECT_EQ(plan.num_splits(), plain.num_splits()) << describe(plan);
    EXPECT_FALSE(plan.fused_combine() || plan.atomic_combine()) << describe(plan);
    EXPECT_FALSE(plan.decode_via_prefill());
    ASSERT_GT(plan.num_splits(), 1) << describe(plan);
    clustered = clustered || plan.cluster_combine();
    if (plan.cluster_combine()) {
      EXPECT_NE(describe(plan).find("sinks folded once by the cluster's merge"), std::string::npos) << describe(plan);
    } else {
      EXPECT_GT(plan.workspace_bytes(), 0u) << "partials for the combine kernel: " << describe(plan);
    }
    PlanOptions cluster;
    cluster.merge = Merge::kCluster;
    cluster.num_splits = 4;
    ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), cluster, &plan).ok()) << max_len;
    EXPECT_TRUE(plan.cluster_combine()) << describe(plan);
    PlanOptions one;
    one.num_splits = 1;
    ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), one, &plan).ok());
    EXPECT_EQ(plan.num_splits(), 1);
    EXPECT_EQ(plan.workspace_bytes(), 0u) << "one split folds the sinks itself: " << describe(plan);
    EXPECT_NE(describe(plan).find("sinks folded into the final rows"), std::string::npos) << describe(plan);
    for (Merge m : {Merge::kFused, Merge::kAtomic}) {
      PlanOptions o;
      o.merge = m;
      o.num_splits = 4;
      EXPECT_EQ(plan_decode(p, DeviceInfo::h200(), o, &plan).argument(), "options.merge") << to_string(m);
    }
  }
  EXPECT_TRUE(clustered) << "no length planned a cluster merge: the auto rules no longer reach these shapes";
}

TEST(VariantGpu, RunCombineChecksSinks) {
  std::vector<float> po(2 * 3 * 4 * 64, 0.f), pl(2 * 3 * 4, 0.f), sinks(4, 1.f);
  std::vector<uint16_t> out(3 * 4 * 64);
  CombineProblem p;
  p.num_splits = 2, p.batch = 3, p.seq_len = 1, p.num_heads = 4, p.head_dim = 64, p.dtype = DType::kBF16;
  p.sinks = true;
  CombineTensors t;
  t.partial_o = TensorRef::contiguous(po.data(), DType::kF32, {2, 3, 4, 64});
  t.partial_lse = TensorRef::contiguous(pl.data(), DType::kF32, {2, 3, 4});
  t.out = TensorRef::contiguous(out.data(), DType::kBF16, {3, 1, 4, 64});
  EXPECT_EQ(run_combine(p, t, nullptr).argument().substr(0, 5), "sinks");  // missing tensor
  t.sinks = TensorRef::contiguous(sinks.data(), DType::kF32, {3});          // one per head
  EXPECT_EQ(run_combine(p, t, nullptr).argument().substr(0, 5), "sinks");
}

}  // namespace
}  // namespace splitkv
