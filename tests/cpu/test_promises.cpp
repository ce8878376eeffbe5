// The API's promises under hostile input, host side (docs/CONTRACTS.md): every bad argument gets an
// error naming it, never a crash; a plan edited after planning is refused; device data that is
// invalid (lengths past the plan's bound) gives NaN in that sequence only on the CPU backend as on
// the GPU; the shared rules the kernels use (varlen rows, TMA views, merge weights) hold.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/lse_combine.hpp"
#include "kernels/common/split_rule.hpp"
#include "kernels/common/varlen_rows.hpp"
#include "kernels/prefill_sm90/tma_operands.hpp"
#include "reference/reference.hpp"
#include "splitkv/append_kv.hpp"
#include "splitkv/splitkv.hpp"
#include "testing/decode_case.hpp"
#include "testing/decode_check.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv {
namespace {

DecodeProblem small_decode() {
  DecodeProblem p;
  p.batch = 2;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.max_kv_len = 1000;
  return p;
}

PrefillProblem small_prefill() {
  PrefillProblem p;
  p.batch = 2;
  p.num_q_heads = p.num_kv_heads = 4;
  p.head_dim = 64;
  p.max_q_len = p.max_kv_len = 300;
  return p;
}

void expect_named(const Status& s, StatusCode code, const std::string& argument) {
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_EQ(s.argument(), argument) << s.message();
  EXPECT_NE(s.message().find(argument), std::string::npos) << s.message();
}

// Item 4: a device description the planner would divide by (or plan nonsense from) is refused.
TEST(Promises, DeviceInfoIsValidatedByName) {
  struct Bad {
    void (*edit)(DeviceInfo&);
    const char* argument;
  };
  const Bad cases[] = {
      {[](DeviceInfo& d) { d.sm_count = 0; }, "device.sm_count"},
      {[](DeviceInfo& d) { d.sm_count = -3; }, "device.sm_count"},
      {[](DeviceInfo& d) { d.sm_count = INT_MAX; }, "device.sm_count"},
      {[](DeviceInfo& d) { d.smem_per_sm_bytes = 0; }, "device.smem_per_sm_bytes"},
      {[](DeviceInfo& d) { d.smem_per_block_bytes = -1; }, "device.smem_per_block_bytes"},
      {[](DeviceInfo& d) { d.smem_per_block_bytes = d.smem_per_sm_bytes + 1; }, "device.smem_per_block_bytes"},
      {[](DeviceInfo& d) { d.l2_bytes = -1; }, "device.l2_bytes"},
      {[](DeviceInfo& d) { d.cc_major = 0; }, "device.cc_major"},
      {[](DeviceInfo& d) { d.cc_minor = -1; }, "device.cc_major"},
  };
  for (const Bad& bad : cases) {
    DeviceInfo d = DeviceInfo::h200();
    bad.edit(d);
    Plan plan;
    expect_named(plan_decode(small_decode(), d, {}, &plan), StatusCode::kInvalidArgument, bad.argument);
    expect_named(plan_prefill(small_prefill(), d, {}, &plan), StatusCode::kInvalidArgument, bad.argument);
  }
  // A real card the kernels do not run on is unsupported, named by the family choice.
  DeviceInfo volta = DeviceInfo::h200();
  volta.cc_major = 7;
  Plan refused;
  expect_named(plan_decode(small_decode(), volta, {}, &refused), StatusCode::kUnsupported, "device");
  // The smallest real card still plans.
  DeviceInfo one = DeviceInfo::h200();
  one.sm_count = 1;
  Plan plan;
  EXPECT_TRUE(plan_decode(small_decode(), one, {}, &plan).ok());
  EXPECT_TRUE(plan_prefill(small_prefill(), one, {}, &plan).ok());
}

// Item 12: options that cannot take effect are refused by name, not dropped.
TEST(Promises, IgnoredOptionsAreRefused) {
  Plan plan;
  PlanOptions o;
  o.merge = static_cast<Merge>(42);
  expect_named(plan_decode(small_decode(), DeviceInfo::h200(), o, &plan), StatusCode::kInvalidArgument,
               "options.merge");
  o = PlanOptions{};
  o.merge = Merge::kFused;
  expect_named(plan_prefill(small_prefill(), DeviceInfo::h200(), o, &plan), StatusCode::kUnsupported,
               "options.merge");
  o = PlanOptions{};
  o.tuning.l2_prefetch_keys = 64;
  expect_named(plan_prefill(small_prefill(), DeviceInfo::h200(), o, &plan), StatusCode::kUnsupported,
               "options.tuning.l2_prefetch_keys");
  for (int keys : {-2, 1001, INT_MAX}) {
    o.tuning.l2_prefetch_keys = keys;
    expect_named(plan_decode(small_decode(), DeviceInfo::h200(), o, &plan), StatusCode::kInvalidArgument,
                 "options.tuning.l2_prefetch_keys");
  }
  o.tuning.l2_prefetch_keys = 1000;
  EXPECT_TRUE(plan_decode(small_decode(), DeviceInfo::h200(), o, &plan).ok());
  DeviceInfo ampere = DeviceInfo::h200();
  ampere.cc_major = 8;
  o.tuning.l2_prefetch_keys = 32;
  expect_named(plan_decode(small_decode(), ampere, o, &plan), StatusCode::kUnsupported, "options.tuning.l2_prefetch_keys");
  o.tuning.l2_prefetch_keys = -1;  // the rule: off before sm_90, not an error
  EXPECT_TRUE(plan_decode(small_decode(), ampere, o, &plan).ok());
  EXPECT_EQ(plan.l2_prefetch_keys(), 0);
}

// Item 7: lengths near INT_MAX neither overflow the page count nor read past a short host block
// table: the table's shape is refused first.
TEST(Promises, HugeLengthsDoNotOverflowThePageCount) {
  testing::DecodeCase c = testing::make_decode_case(testing::DecodeSpecBuilder(2, 8, 2, 64).paged(256).spec);
  DecodeProblem p = c.problem;
  Plan plan;
  p.max_kv_len = INT_MAX - 5;  // past the bound that keeps the kernels' key arithmetic in int
  expect_named(plan_decode(p, DeviceInfo::h200(), {}, &plan), StatusCode::kInvalidArgument, "max_kv_len");
  p.max_kv_len = 1 << 30;
  ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), {}, &plan).ok());
  DecodeTensors t = c.host_tensors();  // block_table [2, 1] with its host copy
  const Status s = run_decode(plan, t, nullptr, 0, nullptr);
  expect_named(s, StatusCode::kInvalidArgument, "block_table.shape[1]");
  EXPECT_NE(s.message().find(std::to_string((1 << 30) / 256)), std::string::npos) << s.message();
  PrefillProblem q = small_prefill();
  q.max_q_len = INT_MAX;
  expect_named(plan_prefill(q, DeviceInfo::h200(), {}, &plan), StatusCode::kInvalidArgument, "max_q_len");
}

// Item 7: a plan edited after planning is refused by every entry point that takes one, before any
// launch; an unedited plan runs.
TEST(Promises, EditedPlansAreRefused) {
  testing::DecodeCase c = testing::make_decode_case(testing::DecodeSpecBuilder(2, 8, 2, 500).lens({500, 77}).spec);
  PlanOptions o;
  o.num_splits = 3;
  Plan planned;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &planned).ok());
  ASSERT_NE(planned.seal(), 0u);
  EXPECT_TRUE(cpu::run_decode(planned, c.host_tensors()).ok());
  const std::vector<void (*)(Plan&)> edits = {
      [](Plan& p) { detail::PlanEditor::fields(p).block_m = 0; },
      [](Plan& p) { detail::PlanEditor::fields(p).num_splits = 0; },
      [](Plan& p) { detail::PlanEditor::fields(p).num_splits = 7; },
      [](Plan& p) { detail::PlanEditor::fields(p).decode.batch = 1; },
      [](Plan& p) { detail::PlanEditor::fields(p).workspace_bytes = 16; },
      [](Plan& p) { detail::PlanEditor::fields(p).grid[0] = 1; },
      [](Plan& p) { detail::PlanEditor::fields(p).family += "_edited"; },
      [](Plan& p) { detail::PlanEditor::fields(p).seal = 0; },
  };
  for (auto edit : edits) {
    Plan p = planned;
    edit(p);
    expect_named(run_decode(p, c.host_tensors(), nullptr, 0, nullptr), StatusCode::kInvalidArgument, "plan");
    expect_named(cpu::run_decode(p, c.host_tensors()), StatusCode::kInvalidArgument, "plan");
    expect_named(prepare_workspace(p, nullptr, 0, nullptr), StatusCode::kInvalidArgument, "plan");
  }
  Plan note_only = planned;
  detail::PlanEditor::fields(note_only).note = "edited for printing";  // the note is not part of the seal
  EXPECT_TRUE(cpu::run_decode(note_only, c.host_tensors()).ok());
  Plan never_planned;
  detail::PlanEditor::fields(never_planned).kind = PlanKind::kPrefill;
  const Status s = run_prefill(never_planned, PrefillTensors{}, nullptr, 0, nullptr);
  expect_named(s, StatusCode::kInvalidArgument, "plan");
  EXPECT_NE(s.message().find("never planned"), std::string::npos) << s.message();
}

// Item 5: a fused-merge plan refuses a workspace nobody prepared for it (its arrival counters would
// be whatever the memory held), by name and before any launch.
TEST(Promises, FusedMergeRefusesAnUnpreparedWorkspace) {
  testing::DecodeCase c = testing::make_decode_case(testing::DecodeSpecBuilder(2, 8, 2, 3000).spec);
  PlanOptions o;
  o.num_splits = 4;
  o.merge = Merge::kFused;
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
  ASSERT_TRUE(plan.fused_combine());
  std::vector<float> workspace(plan.workspace_bytes() / sizeof(float) + 4);
  void* ws = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) % 16) % 16 / sizeof(float);
  const Status s = run_decode(plan, c.host_tensors(), ws, plan.workspace_bytes(), nullptr);
  expect_named(s, StatusCode::kInvalidArgument, "workspace");
  EXPECT_NE(s.message().find("prepare_workspace"), std::string::npos) << s.message();
}

bool is_nan_bf16(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0; }

// Item 2: a device length in (max_kv_len, capacity] is invalid on every route: NaN in that
// sequence only (the CPU backend here; the GPU routes in tests/gpu/test_promises_gpu.cpp).
TEST(Promises, LengthsPastMaxKvLenGiveNanInThatSequenceOnly) {
  for (int split_tokens : {0, 256}) {
    for (int page_size : {0, 16}) {
      testing::DecodeCaseSpec spec =
          testing::DecodeSpecBuilder(3, 8, 2, 2000).paged(page_size).lens({2000, 900, 1500}).spec;
      testing::DecodeCase whole = testing::make_decode_case(spec);
      // The same data planned for 1024 keys: sequence 0 (2000) and 2 (1500) now break the bound.
      testing::DecodeCase c = whole;
      c.problem.max_kv_len = 1024;
      DecodeTensors t = c.host_tensors();
      t.seq_lens_host = nullptr;  // device data: not checked on the host
      t.block_table_host = nullptr;
      PlanOptions o;
      o.split_tokens = split_tokens;
      o.num_splits = split_tokens > 0 ? 0 : 3;  // the same splits in both plans: the same bits
      Plan plan;
      ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
      testing::poison_outputs(c);
      ASSERT_TRUE(cpu::run_decode(plan, t).ok());
      Plan full;
      ASSERT_TRUE(plan_decode(whole.problem, DeviceInfo::h200(), o, &full).ok());
      ASSERT_TRUE(cpu::run_decode(full, whole.host_tensors()).ok());
      for (int b : {0, 2}) {
        for (uint16_t bits : testing::sequence_output_bits(c, b)) {
          ASSERT_TRUE(is_nan_bf16(bits)) << "sequence " << b << " split_tokens " << split_tokens;
        }
      }
      EXPECT_EQ(testing::sequence_output_bits(c, 1), testing::sequence_output_bits(whole, 1));
      for (uint16_t bits : testing::sequence_output_bits(c, 1)) ASSERT_FALSE(is_nan_bf16(bits));
    }
  }
}

// A windowed sequence's keys are read from its first visible key rounded down to the edge the
// decode kernels start on (window_start_edge: a 16-key sub-tile, or the 64-key KV block where the
// splits are batch-invariant or the cache keeps keys per channel): the ids of pages wholly before
// that edge are never read, so an invalid one there changes nothing (an engine may free the pages a
// window left behind), while one the window reads gives NaN in that sequence only (docs/CONTRACTS.md).
TEST(Promises, AWindowReadsNoPageBeforeItsStartEdge) {
  for (int num_splits : {1, 3}) {
    for (int split_tokens : {0, 256}) {
      SCOPED_TRACE("splits " + std::to_string(num_splits) + " split_tokens " + std::to_string(split_tokens));
      testing::DecodeCaseSpec spec = testing::DecodeSpecBuilder(2, 8, 2, 3000).paged(16).lens({3000, 250}).spec;
      spec.problem.window_left = 100;
      testing::DecodeCase clean = testing::make_decode_case(spec);
      PlanOptions o;
      o.split_tokens = split_tokens;
      o.num_splits = split_tokens > 0 ? 0 : num_splits;
      Plan plan;
      ASSERT_TRUE(plan_decode(clean.problem, DeviceInfo::h200(), o, &plan).ok());
      const int first = detail::first_visible_key(3000, 0, 1, 100);
      const int edge = detail::window_start_edge(plan.num_splits(), plan.split_tokens(), plan.block_n(), false);
      const int start = detail::split_base(first, edge);
      ASSERT_GE(start, 16) << "the case needs a page before the start";
      ASSERT_TRUE(cpu::run_decode(plan, clean.host_tensors()).ok());
      // page_before: wholly before the start edge (never read); page_seen: holds the first visible key.
      const int page_before = start / 16 - 1, page_seen = first / 16;
      for (int page : {page_before, page_seen}) {
        testing::DecodeCase c = clean;
        c.block_table[size_t(page)] = -1;  // sequence 0's entry
        testing::poison_outputs(c);
        DecodeTensors t = c.host_tensors();
        t.block_table_host = nullptr;  // device data: not checked on the host
        ASSERT_TRUE(cpu::run_decode(plan, t).ok());
        EXPECT_EQ(testing::sequence_output_bits(c, 1), testing::sequence_output_bits(clean, 1));
        if (page == page_before) {
          EXPECT_EQ(testing::sequence_output_bits(c, 0), testing::sequence_output_bits(clean, 0)) << "page " << page;
        } else {
          for (uint16_t bits : testing::sequence_output_bits(c, 0)) ASSERT_TRUE(is_nan_bf16(bits)) << "page " << page;
        }
      }
    }
  }
}

// Item 11: an empty partial (LSE = -inf) takes no part in a merge whatever its O holds.
TEST(Promises, EmptyPartialsWithNanOutputHaveWeightZero) {
  EXPECT_EQ(detail::combine_term(0.0, std::nan("")), 0.0);
  EXPECT_EQ(detail::combine_term(0.f, std::numeric_limits<float>::infinity()), 0.f);
  DecodeProblem p = small_decode();
  p.batch = 1;
  p.num_q_heads = p.num_kv_heads = 1;
  ref::Result a, b;
  a.out.assign(128, 0.5);
  a.lse = {1.0};
  b.out.assign(128, std::nan(""));
  b.lse = {-std::numeric_limits<double>::infinity()};
  const ref::Result merged = ref::merge_decode_partials({a, b}, p);
  EXPECT_EQ(merged.lse[0], 1.0);
  for (double x : merged.out) ASSERT_EQ(x, 0.5);
}

// Item 3: the rows of a varlen sequence never leave [0, total_q), whatever its device offsets.
TEST(Promises, VarlenRowsStayInsideTheTensor) {
  struct Case {
    std::vector<int32_t> cu;
    int b;
    int64_t begin;
    int len;
    bool bad;
  };
  const int64_t total = 100;
  const int max_len = 40;
  const Case cases[] = {
      {{0, 30, 70}, 1, 30, 40, false},  {{0, 30, 71}, 1, 30, 40, true},   {{-5, 10}, 0, 0, 10, true},
      {{90, 130}, 0, 90, 10, true},     {{200, 220}, 0, 100, 0, true},    {{50, 20}, 0, 50, 0, true},
      {{INT_MIN, INT_MAX}, 0, 0, 40, true}, {{0, 0}, 0, 0, 0, false},
  };
  for (const Case& k : cases) {
    const detail::VarlenRows r = detail::varlen_rows(k.cu.data(), k.b, total, max_len);
    EXPECT_EQ(r.begin, k.begin);
    EXPECT_EQ(r.len, k.len);
    EXPECT_EQ(r.bad, k.bad);
    EXPECT_GE(r.begin, 0);
    EXPECT_LE(r.begin + r.len, total);
  }
}

// Item 8: the TMA views' extent-1 strides are normalized, and a stride TMA cannot take is found.
TEST(Promises, TmaViewsNormalizeAndFindUnencodableStrides) {
  detail::PrefillParams p{};
  p.batch = 1;
  p.num_q_heads = 1;
  p.num_kv_heads = 4;
  p.max_q_len = 1;
  p.max_kv_len = 512;
  p.q_token_stride = 3;  // any value: one token, one head, one sequence
  p.q_head_stride = 0;
  p.q_batch_stride = 7;
  detail::TmaView q = detail::tma_token_view(p, detail::TmaOperand::kQ, 128);
  EXPECT_EQ(detail::first_untmaable_dim(q, 2), -1);
  EXPECT_EQ(q.stride[0], 128);
  p.kv.k.token_stride = 4 * 128;
  p.kv.k.head_stride = 0;  // four heads broadcast from one: fine for plain loads, not for TMA
  p.kv.k.block_stride = 1;
  detail::TmaView k = detail::tma_token_view(p, detail::TmaOperand::kK, 128);
  EXPECT_EQ(detail::first_untmaable_dim(k, 2), 2);
  EXPECT_EQ(k.tensor_dim[2], 2);
  p.kv.k.head_stride = 128;
  k = detail::tma_token_view(p, detail::TmaOperand::kK, 128);
  EXPECT_EQ(detail::first_untmaable_dim(k, 2), -1);  // the batch of 1: its stride normalized
  p.kv.k.token_stride = int64_t(1) << 40;
  k = detail::tma_token_view(p, detail::TmaOperand::kK, 128);
  EXPECT_EQ(detail::first_untmaable_dim(k, 2), 0);
}

// Outputs whose elements overlap (a stride of 0, rows on top of each other) are refused by name:
// their writes would collide into a silently wrong result.
TEST(Promises, AliasedOutputsAreRefused) {
  testing::DecodeCase c = testing::make_decode_case(testing::DecodeSpecBuilder(2, 8, 2, 100).spec);
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  DecodeTensors t = c.host_tensors();
  t.out.stride[2] = 0;  // every head writes one row
  expect_named(run_decode(plan, t, nullptr, 0, nullptr), StatusCode::kInvalidArgument, "out.stride[2]");
  t = c.host_tensors();
  t.out.stride[1] = 8;  // rows of 128 elements 8 apart
  t.out.stride[2] = 8;
  EXPECT_EQ(run_decode(plan, t, nullptr, 0, nullptr).code(), StatusCode::kInvalidArgument);
  t = c.host_tensors();
  t.lse.stride[1] = 0;
  expect_named(run_decode(plan, t, nullptr, 0, nullptr), StatusCode::kInvalidArgument, "lse.stride[1]");
  // Inputs may broadcast: q's heads from one row are a valid (if odd) query.
  t = c.host_tensors();
  t.q.stride[2] = 0;
  EXPECT_TRUE(cpu::run_decode(plan, t).ok());
}

TEST(Promises, AppendRefusesAliasedCaches) {
  std::vector<uint16_t> cache(2 * 16 * 2 * 64), rows(3 * 2 * 64);
  std::vector<int64_t> slots = {0, 1, 2};
  AppendKvProblem p;
  p.num_tokens = 3;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.page_size = 16;
  AppendKvTensors t;
  t.k = t.v = TensorRef::contiguous(rows.data(), DType::kBF16, {3, 2, 64});
  t.slots = TensorRef::contiguous(slots.data(), DType::kI64, {3});
  std::vector<uint16_t> other(cache.size());
  t.k_cache = TensorRef::contiguous(cache.data(), DType::kBF16, {2, 16, 2, 64});
  t.v_cache = TensorRef::contiguous(other.data(), DType::kBF16, {2, 16, 2, 64});
  t.k_cache.stride[2] = 0;  // both heads into one row
  expect_named(run_append_kv(p, t, nullptr), StatusCode::kInvalidArgument, "k_cache.stride[2]");
  t.k_cache = t.v_cache;
  expect_named(run_append_kv(p, t, nullptr), StatusCode::kInvalidArgument, "v_cache");
}

}  // namespace
}  // namespace splitkv
