// Channel-quantized keys (src/quant/kv_quant_kc.hpp): a group's codes and per-channel scales follow
// the per-token row rule applied to each column; appends in any chunking give the same bytes as
// one append; reads give the codes of complete groups and the 16-bit tail of the incomplete one;
// rolled-back drafts are re-appended correctly; bad tokens are skipped; bad views are named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/half_convert.hpp"
#include "cpu/cpu_backend.hpp"
#include "quant/kv_quant_kc.hpp"
#include "splitkv/append_kv.hpp"
#include "splitkv/splitkv.hpp"
#include "testing/decode_check.hpp"

namespace splitkv::quant {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A paged (or contiguous) key cache in host memory, every byte poisoned first.
struct KcCache {
  KcKeyCacheView view;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales, tail;

  KcCache(int bits, int d, int hkv, int64_t slots, int64_t blocks, int64_t tail_slots, DType tail_dtype) {
    view.bits = bits;
    view.head_dim = d;
    view.slots = slots;
    view.num_blocks = blocks;
    view.num_kv_heads = hkv;
    const int64_t row_elements = d;  // code elements per (slot, head)
    view.code_stride_head = row_elements;
    view.code_stride_slot = row_elements * hkv;
    view.code_stride_block = view.code_stride_slot * slots;
    codes.assign(size_t(blocks * view.code_stride_block * bits / 8), 0xa5);
    view.codes = codes.data();
    const int64_t groups = view.groups_per_block();
    view.scale_stride_group = 2 * d;
    view.scale_stride_head = groups * 2 * d;
    view.scale_stride_block = view.scale_stride_head * hkv;
    scales.assign(size_t(blocks * view.scale_stride_block), 0x7e00);
    view.group_scales = scales.data();
    view.tail_dtype = tail_dtype;
    view.num_tail_slots = tail_slots;
    view.tail_stride_row = d;
    view.tail_stride_head = int64_t(kKeyTailRows) * d;
    view.tail_stride_slot = view.tail_stride_head * hkv;
    tail.assign(size_t(tail_slots * view.tail_stride_slot), 0x7e00);
    view.tail = tail.data();
  }
};

// Keys of `len` positions of one sequence: [len][Hkv][D], with two outlier channels.
std::vector<float> random_keys(int len, int hkv, int d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> k(size_t(len) * hkv * d);
  for (size_t i = 0; i < k.size(); ++i) {
    const int c = int(i % d);
    k[i] = normal(rng) * (c == 3 || c == d - 5 ? 20.f : 1.f) + (c == 7 ? 6.f : 0.f);
  }
  return k;
}

// Appends positions [from, to) of a sequence whose pages are `pages` (block p / slots of the
// sequence is pages[p / slots]) in chunks of `chunk`.
void append_range(const KcCache& cache, const std::vector<float>& keys, const std::vector<int64_t>& pages,
                  int64_t tail_slot, int from, int to, int chunk) {
  const int hkv = cache.view.num_kv_heads, d = cache.view.head_dim;
  for (int c0 = from; c0 < to; c0 += chunk) {
    std::vector<KcAppendToken> tokens;
    for (int p = c0; p < std::min(to, c0 + chunk); ++p) {
      tokens.push_back({pages[size_t(p / cache.view.slots)] * cache.view.slots + p % cache.view.slots, p, tail_slot,
                        &keys[size_t(p) * hkv * d]});
    }
    append_keys(cache.view, tokens);
  }
}

// What read_key must give for position p of a sequence of length len: the group's column
// quantization of the 16-bit keys, or the 16-bit key itself in the incomplete group.
std::vector<float> expected_key(const KcKeyCacheView& v, const std::vector<float>& keys, int len, int p, int h) {
  const int d = v.head_dim, hkv = v.num_kv_heads;
  std::vector<float> x(d);
  auto key = [&](int q, int c) { return detail::round_to(keys[(size_t(q) * hkv + h) * d + c], v.tail_dtype); };
  if (p >= len / kKeyGroup * kKeyGroup) {
    for (int c = 0; c < d; ++c) x[c] = key(p, c);
    return x;
  }
  const int first = p / kKeyGroup * kKeyGroup;
  std::vector<float> column(kKeyGroup), back(kKeyGroup);
  std::vector<uint8_t> packed(kKeyGroup);
  for (int c = 0; c < d; ++c) {
    for (int i = 0; i < kKeyGroup; ++i) column[i] = key(first + i, c);
    const RowScale s = quantize_row_int(column.data(), kKeyGroup, v.bits, packed.data());
    dequantize_row_int(packed.data(), kKeyGroup, v.bits, s, back.data());
    x[c] = back[p - first];
  }
  return x;
}

void expect_sequence(const KcCache& cache, const std::vector<float>& keys, const std::vector<int64_t>& pages,
                     int64_t tail_slot, int len) {
  const KcKeyCacheView& v = cache.view;
  std::vector<float> got(v.head_dim);
  for (int p = 0; p < len; ++p) {
    for (int h = 0; h < v.num_kv_heads; ++h) {
      read_key(v, len, p, pages[size_t(p / v.slots)], tail_slot, h, got.data());
      const std::vector<float> want = expected_key(v, keys, len, p, h);
      for (int c = 0; c < v.head_dim; ++c) {
        ASSERT_EQ(got[c], want[c]) << "len " << len << " position " << p << " head " << h << " channel " << c;
      }
    }
  }
}

class KcAppend : public ::testing::TestWithParam<int> {};  // bits

TEST_P(KcAppend, GroupsAreColumnsOfTheRowRuleAndTheTailIs16Bit) {
  const int bits = GetParam(), d = 64, hkv = 2;
  KcCache cache(bits, d, hkv, /*slots=*/128, /*blocks=*/4, /*tail_slots=*/3, DType::kBF16);
  const std::vector<int64_t> pages{2, 0, 3};  // 384 positions
  const std::vector<float> keys = random_keys(330, hkv, d, 7);
  append_range(cache, keys, pages, /*tail_slot=*/1, 0, 330, 330);
  // Lengths down to the start of the newest complete group read the same cache (rollback).
  for (int len : {256, 257, 300, 320, 321, 330}) expect_sequence(cache, keys, pages, 1, len);
}

TEST_P(KcAppend, AnyChunkingGivesTheSameBytes) {
  const int bits = GetParam(), d = 128, hkv = 2;
  const std::vector<int64_t> pages{1, 0, 2};
  const std::vector<float> keys = random_keys(300, hkv, d, 11);
  KcCache whole(bits, d, hkv, 128, 3, 2, DType::kF16);
  append_range(whole, keys, pages, 0, 0, 300, 300);
  for (int chunk : {1, 5, 63, 64, 65, 129, 200}) {
    KcCache chunked(bits, d, hkv, 128, 3, 2, DType::kF16);
    append_range(chunked, keys, pages, 0, 0, 300, chunk);
    EXPECT_EQ(chunked.codes, whole.codes) << "chunk " << chunk;
    EXPECT_EQ(chunked.scales, whole.scales) << "chunk " << chunk;
    expect_sequence(chunked, keys, pages, 0, 300);
  }
}

TEST_P(KcAppend, RejectedDraftsAreReplacedAcrossAGroupBoundary) {
  const int bits = GetParam(), d = 64, hkv = 1;
  const std::vector<int64_t> pages{2, 0, 3, 1};
  std::vector<float> accepted = random_keys(200, hkv, d, 3);
  const std::vector<float> drafts = random_keys(200, hkv, d, 4);
  KcCache cache(bits, d, hkv, 64, 4, 1, DType::kBF16);
  append_range(cache, accepted, pages, 0, 0, 100, 100);
  // Forty drafts cross the group boundary at 128; all but the first four are rejected.
  std::vector<float> with_drafts = accepted;
  std::copy(drafts.begin() + 100 * d, drafts.begin() + 140 * d, with_drafts.begin() + 100 * d);
  append_range(cache, with_drafts, pages, 0, 100, 140, 40);
  expect_sequence(cache, with_drafts, pages, 0, 140);
  std::copy(with_drafts.begin() + 100 * d, with_drafts.begin() + 104 * d, accepted.begin() + 100 * d);
  expect_sequence(cache, accepted, pages, 0, 104);  // rolled back: group 1 is incomplete again
  append_range(cache, accepted, pages, 0, 104, 200, 7);
  expect_sequence(cache, accepted, pages, 0, 200);
}

TEST_P(KcAppend, InterleavedSequencesKeepTheirOwnTails) {
  const int bits = GetParam(), d = 64, hkv = 2;
  KcCache cache(bits, d, hkv, 64, 8, 4, DType::kBF16);
  const std::vector<int64_t> pages_a{5, 1, 6}, pages_b{0, 7, 2};
  const std::vector<float> a = random_keys(190, hkv, d, 21), b = random_keys(170, hkv, d, 22);
  // Calls hold tokens of both sequences, each sequence's tokens contiguous and in order.
  int la = 0, lb = 0;
  std::mt19937 rng(5);
  while (la < 190 || lb < 170) {
    const int na = std::min(190 - la, int(rng() % 70)), nb = std::min(170 - lb, int(rng() % 70));
    std::vector<KcAppendToken> tokens;
    for (int p = lb; p < lb + nb; ++p) tokens.push_back({pages_b[p / 64] * 64 + p % 64, p, 3, &b[size_t(p) * hkv * d]});
    for (int p = la; p < la + na; ++p) tokens.push_back({pages_a[p / 64] * 64 + p % 64, p, 0, &a[size_t(p) * hkv * d]});
    append_keys(cache.view, tokens);
    la += na;
    lb += nb;
    expect_sequence(cache, a, pages_a, 0, la);
    expect_sequence(cache, b, pages_b, 3, lb);
  }
}

TEST_P(KcAppend, ContiguousCacheWhoseCapacityEndsInsideAGroup) {
  const int bits = GetParam(), d = 64, hkv = 1;
  KcCache cache(bits, d, hkv, /*slots=*/100, /*blocks=*/2, 2, DType::kBF16);
  const std::vector<float> keys = random_keys(100, hkv, d, 9);
  const std::vector<int64_t> row{1};  // sequence 1 of the contiguous cache
  append_range(cache, keys, row, 1, 0, 100, 33);
  expect_sequence(cache, keys, row, 1, 100);
}

INSTANTIATE_TEST_SUITE_P(Bits, KcAppend, ::testing::Values(8, 4),
                         [](const auto& info) { return info.param == 8 ? "int8" : "int4"; });

TEST(KcAppendSkips, InvalidTokensWriteNothing) {
  const int d = 64, hkv = 1;
  KcCache cache(4, d, hkv, 64, 2, 1, DType::kBF16);
  const std::vector<uint8_t> codes = cache.codes;
  const std::vector<uint16_t> scales = cache.scales, tail = cache.tail;
  const std::vector<float> keys = random_keys(64, hkv, d, 1);
  std::vector<KcAppendToken> tokens;
  for (int p = 0; p < 64; ++p) {
    KcAppendToken t{p, p, 0, &keys[size_t(p) * d]};
    switch (p % 4) {
      case 0: t.slot = 2 * 64 + p; break;   // past the cache
      case 1: t.slot = p + 1; break;        // offset is not position % slots
      case 2: t.tail_slot = 1; break;       // past the tail slots
      case 3: t.position = -1; break;
    }
    tokens.push_back(t);
  }
  tokens.push_back({-1, 5, 0, &keys[0]});
  append_keys(cache.view, tokens);
  EXPECT_EQ(cache.codes, codes);
  EXPECT_EQ(cache.scales, scales);
  EXPECT_EQ(cache.tail, tail);
}

TEST(KcGroup, NonFiniteKeysMakeTheirChannelNaNOnly) {
  const int d = 64, hkv = 1;
  KcCache cache(8, d, hkv, 64, 1, 1, DType::kBF16);
  std::vector<float> keys = random_keys(64, hkv, d, 2);
  keys[size_t(10) * d + 5] = kNaN;
  append_range(cache, keys, {0}, 0, 0, 64, 64);
  std::vector<float> x(d);
  for (int p = 0; p < 64; ++p) {
    read_key(cache.view, 64, p, 0, 0, 0, x.data());
    for (int c = 0; c < d; ++c) EXPECT_EQ(std::isnan(x[c]), c == 5) << p << " " << c;
  }
}

TEST(KcView, BadViewsAreNamed) {
  KcCache cache(4, 64, 1, 128, 1, 1, DType::kBF16);
  EXPECT_TRUE(check_kc_view(cache.view, true).ok());
  auto named = [&](KcKeyCacheView v, bool paged) { return check_kc_view(v, paged).argument(); };
  KcKeyCacheView v = cache.view;
  v.slots = 48;
  EXPECT_EQ(named(v, true), "page_size");
  EXPECT_TRUE(check_kc_view(v, false).ok());  // a contiguous capacity need not be a multiple of 64
  v = cache.view;
  v.tail_dtype = DType::kF32;
  EXPECT_EQ(named(v, true), "tail_dtype");
  v = cache.view;
  v.code_stride_slot = 63;
  EXPECT_EQ(named(v, true), "code_stride_slot");
  v = cache.view;
  v.tail = nullptr;
  EXPECT_EQ(named(v, true), "tail");
  v = cache.view;
  v.bits = 2;
  EXPECT_EQ(named(v, true), "bits");
}

}  // namespace
}  // namespace splitkv::quant

// ---- the *_kc formats through the API: planning, the CPU backend, the reference, the checks ------


namespace splitkv {
namespace {

const KvFormat kKcFormats[] = {KvFormat::kInt8Kc, KvFormat::kInt4Kc, KvFormat::kK8V4Kc};

// The CPU backend over channel-quantized keys (complete groups from codes, the newest from the tail)
// matches the fp64 reference over the values the cache stands for.
TEST(KcFormats, CpuBackendMatchesReference) {
  for (KvFormat f : kKcFormats) {
    testing::DecodeSpecBuilder contiguous = testing::DecodeSpecBuilder(3, 8, 2, 700).head_dim(64).format(f).lens({700, 63, 0});
    testing::DecodeSpecBuilder paged64 = testing::DecodeSpecBuilder(3, 32, 8, 1000).format(f).paged(64).lens({1000, 64, 1});
    testing::DecodeSpecBuilder paged128 = testing::DecodeSpecBuilder(2, 8, 2, 500).head_dim(64).format(f).paged(128);
    paged128.queries(4, true);
    for (const testing::DecodeSpecBuilder& b : {contiguous, paged64, paged128}) {
      for (int splits : {0, 3}) {
        PlanOptions o;
        o.num_splits = splits;
        Plan plan;
        ASSERT_TRUE(plan_decode(b.spec.problem, DeviceInfo::h200(), o, &plan).ok()) << to_string(f);
        testing::DecodeCase c = testing::make_decode_case(b.spec);
        ASSERT_TRUE(cpu::run_decode(plan, c.host_tensors()).ok()) << to_string(f);
        const testing::Comparison cmp = testing::check_decode(c);
        EXPECT_TRUE(cmp.passed) << to_string(f) << " page " << b.spec.problem.page_size << " splits "
                                << plan.num_splits() << ": " << cmp.summary();
      }
    }
  }
}

// A tail slot outside k_tail (device data) is NaN in that sequence only.
TEST(KcFormats, ATailSlotOutsideTheTailIsNaNInItsSequenceOnly) {
  testing::DecodeCase c = testing::make_decode_case(
      testing::DecodeSpecBuilder(3, 8, 2, 300).head_dim(64).format(KvFormat::kInt4Kc).lens({300, 200, 100}).spec);
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  for (int32_t bad : {-1, 3, 1 << 30}) {
    std::vector<int32_t> slots = {0, bad, 2};
    DecodeTensors t = c.host_tensors();
    t.tail_slots = TensorRef::contiguous(slots.data(), DType::kI32, {3});
    testing::poison_outputs(c);
    ASSERT_TRUE(cpu::run_decode(plan, t).ok());
    for (int b = 0; b < 3; ++b) {
      const float lse = c.lse[size_t(b) * 8];
      EXPECT_EQ(std::isnan(lse), b == 1) << "tail slot " << bad << " sequence " << b;
    }
  }
  // tail_slots naming the rows differently reads those rows.
  std::vector<int32_t> identity = {0, 1, 2};
  DecodeTensors t = c.host_tensors();
  t.tail_slots = TensorRef::contiguous(identity.data(), DType::kI32, {3});
  ASSERT_TRUE(cpu::run_decode(plan, t).ok());
  EXPECT_TRUE(testing::check_decode(c).passed);
}

// No decode kernel reads channel-quantized keys yet: every *_kc decode plan is chunked prefill over
// the dequantized cache (which reads them), at any q_len; options only the decode kernels take are
// refused by name.
TEST(KcFormats, DecodePlansAreChunkedPrefillAndDecodeOnlyOptionsAreRefused) {
  for (KvFormat f : kKcFormats) {
    for (int q_len : {1, 4}) {
      DecodeProblem p = testing::DecodeSpecBuilder(8, 32, 8, 32768).format(f).queries(q_len, true).spec.problem;
      Plan plan;
      const Status planned = plan_decode(p, DeviceInfo::h200(), {}, &plan);
      ASSERT_TRUE(planned.ok()) << planned.message();
      EXPECT_TRUE(plan.decode_via_prefill()) << describe(plan);
      EXPECT_GT(plan.workspace_bytes(), 0u) << "the staging copy";
      EXPECT_NE(describe(plan).find("decode kernels only by options.family"), std::string::npos) << describe(plan);
      DeviceInfo ampere = DeviceInfo::h200();
      ampere.cc_major = 8;
      EXPECT_TRUE(plan_decode(p, ampere, {}, &plan).ok()) << "sm_80: the mma.sync prefill family";
      EXPECT_TRUE(plan.decode_via_prefill());
    }
    DecodeProblem p = testing::DecodeSpecBuilder(8, 32, 8, 4096).format(f).spec.problem;
    auto refused = [&](PlanOptions o) {
      Plan plan;
      const Status s = plan_decode(p, DeviceInfo::h200(), o, &plan);
      EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
      return s.argument();
    };
    PlanOptions o;
    o.family = "decode_quant";
    EXPECT_EQ(refused(o), "options.family");
    o = PlanOptions{};
    o.merge = Merge::kFused;
    EXPECT_EQ(refused(o), "options.merge");
    o = PlanOptions{};
    o.split_tokens = 256;
    EXPECT_EQ(refused(o), "options.split_tokens");
    o = PlanOptions{};
    o.strategy = Strategy::kSplitQ;
    EXPECT_EQ(refused(o), "options.strategy");
    // The decode kernel that reads them, by name (<= 8 packed rows per KV head), with its options.
    o = PlanOptions{};
    o.family = "decode_kc_n8";
    Plan plan;
    ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), o, &plan).ok());
    EXPECT_FALSE(plan.decode_via_prefill());
    EXPECT_EQ(plan.family(), "decode_kc_n8");
    o.split_tokens = 512;
    ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), o, &plan).ok());
    EXPECT_EQ(plan.split_tokens(), 512);
    DecodeProblem wide = p;
    wide.q_len = 4;  // 16 packed rows
    EXPECT_EQ(plan_decode(wide, DeviceInfo::h200(), o, &plan).argument(), "q_len");
  }
}

// The decode kernel over *_kc copies group-scale rows in 16-byte pieces and reads the tail in 4-byte
// pairs, and serves no context shard: run_decode refuses what it cannot read by name, before any
// device work (host pointers here, never dereferenced).
TEST(KcFormats, TheDecodeKernelRefusesWhatItCannotReadByName) {
  testing::DecodeCase c =
      testing::make_decode_case(testing::DecodeSpecBuilder(2, 32, 8, 300).format(KvFormat::kInt4Kc).spec);
  PlanOptions o;
  o.family = "decode_kc_n8";
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
  std::vector<char> workspace(plan.workspace_bytes() + 256);
  auto argument = [&](const DecodeTensors& t) {
    return testing::argument_root(run_decode(plan, t, workspace.data(), workspace.size(), nullptr));
  };
  DecodeTensors t = c.host_tensors();
  t.k_scales.data = static_cast<char*>(t.k_scales.data) + 2;
  EXPECT_EQ(argument(t), "k_scales");
  t = c.host_tensors();
  t.k_tail.data = static_cast<char*>(t.k_tail.data) + 2;
  EXPECT_EQ(argument(t), "k_tail");
  t = c.host_tensors();
  std::vector<int32_t> after = {0, 0};
  t.keys_after = TensorRef::contiguous(after.data(), DType::kI32, {2});
  EXPECT_EQ(argument(t), "keys_after");
}

TEST(KcFormats, CacheTensorsAreCheckedByName) {
  testing::DecodeCase c =
      testing::make_decode_case(testing::DecodeSpecBuilder(2, 4, 2, 200).head_dim(64).format(KvFormat::kK8V4Kc).spec);
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  auto argument = [&](const DecodeTensors& t) { return testing::argument_root(cpu::run_decode(plan, t)); };
  DecodeTensors t = c.host_tensors();
  ASSERT_TRUE(cpu::run_decode(plan, t).ok());
  t.k_tail = TensorRef{};
  EXPECT_EQ(argument(t), "k_tail");
  t = c.host_tensors();
  t.k_tail.shape[2] = 64;  // one group, not the ring of two
  EXPECT_EQ(argument(t), "k_tail");
  t = c.host_tensors();
  t.k_tail.shape[0] = 1;  // fewer rows than sequences, no tail_slots
  EXPECT_EQ(argument(t), "k_tail");
  t = c.host_tensors();
  t.k_scales.shape[3] = 64;  // per-token pairs' width, not 2 * D
  EXPECT_EQ(argument(t), "k_scales");
  t = c.host_tensors();
  std::vector<int64_t> wide(2);
  t.tail_slots = TensorRef::contiguous(wide.data(), DType::kI64, {2});
  EXPECT_EQ(argument(t), "tail_slots");
  // Pages must hold whole key groups.
  testing::DecodeCase p16 = testing::make_decode_case(
      testing::DecodeSpecBuilder(1, 4, 2, 100).head_dim(64).format(KvFormat::kInt4Kc).paged(16).spec);
  Plan plan16;
  ASSERT_TRUE(plan_decode(p16.problem, DeviceInfo::h200(), {}, &plan16).ok());
  EXPECT_EQ(cpu::run_decode(plan16, p16.host_tensors()).argument(), "page_size");
  // A tail on a per-token cache is refused too.
  testing::DecodeCase int4 =
      testing::make_decode_case(testing::DecodeSpecBuilder(2, 4, 2, 200).head_dim(64).format(KvFormat::kInt4).spec);
  Plan int4_plan;
  ASSERT_TRUE(plan_decode(int4.problem, DeviceInfo::h200(), {}, &int4_plan).ok());
  DecodeTensors extra = int4.host_tensors();
  extra.k_tail = c.host_tensors().k_tail;
  EXPECT_EQ(cpu::run_decode(int4_plan, extra).argument(), "k_tail");
}

}  // namespace
}  // namespace splitkv
