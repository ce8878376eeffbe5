// The math of context-parallel decode: a sequence's keys split into shards (one per GPU), each
// shard attended on its own with causal masking in global positions, and the shards' partials
// merged by their log-sum-exp, equal the fp64 reference over the whole context (to 1e-12).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/half_convert.hpp"
#include "cpu/cpu_backend.hpp"
#include "fp64_agreement.hpp"
#include "kernels/common/lse_combine.hpp"
#include "reference/reference.hpp"
#include "testing/decode_case.hpp"

namespace splitkv {
namespace {

struct ShardCase {
  std::string name;
  testing::DecodeCaseSpec spec;
  int num_shards;
};

testing::DecodeCaseSpec spec(int batch, int hq, int hkv, int max_len, std::vector<int> lens, int q_len, bool causal,
                             int page_size, KvFormat format = KvFormat::kNative) {
  return testing::DecodeSpecBuilder(batch, hq, hkv, max_len)
      .head_dim(64)
      .queries(q_len, causal)
      .paged(page_size)
      .format(format)
      .lens(std::move(lens))
      .spec;
}

// Paged shards: shard s of sequence b holds keys [offset, offset + n) through its own block
// table (the sequence's pages from offset / page_size on), so offsets are whole pages; shards are
// unequal, some empty, chosen at random.
TEST(ContextShards, PagedShardsMergeToTheWholeContext) {
  const ShardCase cases[] = {
      {"gqa_32_8_q1", spec(3, 32, 8, 1500, {1500, 700, 0}, 1, false, 16), 2},
      {"gqa_28_4_q4_causal", spec(2, 28, 4, 1300, {1300, 37}, 4, true, 16), 3},
      {"q16_causal_page256", spec(2, 8, 2, 2100, {2100, 530}, 16, true, 256), 4},
      {"mqa_8_1_q2_causal_int8", spec(2, 8, 1, 900, {900, 400}, 2, true, 16, KvFormat::kInt8), 2},
  };
  std::mt19937 rng(7);
  for (const ShardCase& k : cases) {
    testing::DecodeCase c = testing::make_decode_case(k.spec);
    const DecodeTensors whole = c.host_tensors();
    const ref::Result want = ref::decode(c.problem, whole);
    const int B = c.problem.batch, P = c.problem.page_size;

    // Cut points per sequence: page multiples, sorted, possibly equal (empty shards).
    std::vector<std::vector<int>> cuts(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) {
      const int len = c.seq_lens[size_t(b)], pages = (len + P - 1) / P;
      std::vector<int> at = {0, len};
      for (int s = 1; s < k.num_shards; ++s) at.push_back(std::min(len, int(rng() % uint32_t(pages + 1)) * P));
      std::sort(at.begin(), at.end());
      cuts[size_t(b)] = at;
    }
    std::vector<ref::Result> partials;
    for (int s = 0; s < k.num_shards; ++s) {
      const size_t n = static_cast<size_t>(B);
      std::vector<int32_t> lens(n), offsets(n), totals(n);
      std::vector<int32_t> table(c.block_table.size(), 0);
      for (int b = 0; b < B; ++b) {
        offsets[size_t(b)] = cuts[size_t(b)][size_t(s)];
        lens[size_t(b)] = cuts[size_t(b)][size_t(s) + 1] - offsets[size_t(b)];
        totals[size_t(b)] = c.seq_lens[size_t(b)];
        const int first_page = offsets[size_t(b)] / P;
        for (int j = 0; first_page + j < int(c.max_pages); ++j) {
          table[size_t(b * c.max_pages + j)] = c.block_table[size_t(b * c.max_pages + first_page + j)];
        }
      }
      DecodeTensors shard = whole;
      shard.seq_lens.data = lens.data();
      shard.seq_lens_host = lens.data();
      shard.block_table.data = table.data();
      shard.block_table_host = table.data();
      partials.push_back(ref::decode_shard(c.problem, shard, ref::Shard{offsets.data(), totals.data()}));
    }
    const ref::Result got = ref::merge_decode_partials(partials, c.problem);
    testing::expect_results_agree(want, got, k.name);
  }
}

// Contiguous shards at one offset for every sequence are views of the cache (the data pointer
// moved by the offset); a shard past a sequence's causal horizon contributes nothing.
TEST(ContextShards, ContiguousShardsAndShardsNoQuerySees) {
  testing::DecodeCase c = testing::make_decode_case(spec(2, 16, 4, 1000, {1000, 600}, 8, true, 0));
  const DecodeTensors whole = c.host_tensors();
  const ref::Result want = ref::decode(c.problem, whole);
  const int cut = 600;  // sequence 1 ends here: its second shard is empty
  std::vector<ref::Result> partials;
  for (int s = 0; s < 2; ++s) {
    std::vector<int32_t> lens(2), offsets(2, s == 0 ? 0 : cut), totals(c.seq_lens.begin(), c.seq_lens.end());
    for (int b = 0; b < 2; ++b) lens[size_t(b)] = s == 0 ? std::min(cut, totals[size_t(b)]) : totals[size_t(b)] - cut;
    DecodeTensors shard = whole;
    for (TensorRef* t : {&shard.k, &shard.v}) {
      const int64_t first = s == 0 ? 0 : cut;
      t->data = static_cast<char*>(t->data) + first * t->stride[1] * 2;  // bf16
      t->shape[1] -= first;
    }
    shard.seq_lens.data = lens.data();
    shard.seq_lens_host = lens.data();
    partials.push_back(ref::decode_shard(c.problem, shard, ref::Shard{offsets.data(), totals.data()}));
  }
  // Sequence 1's second shard saw nothing: LSE -inf, output zeros.
  const int Hq = c.problem.num_q_heads, Lq = c.problem.q_len;
  for (int h = 0; h < Hq; ++h)
    for (int i = 0; i < Lq; ++i) EXPECT_TRUE(std::isinf(partials[1].lse[(size_t(1) * Hq + h) * Lq + i]));
  const ref::Result got = ref::merge_decode_partials(partials, c.problem);
  testing::expect_results_agree(want, got, "contiguous");
}

// The CPU backend decodes a shard (keys_after, caller partials in the public layout) like the fp64
// reference's shard partial: each split's partials merged in the test's fp64 formula agree with it.
TEST(ContextShards, CpuBackendShardPartialsMatchTheReferenceShard) {
  for (int q_len : {1, 5}) {
    testing::DecodeCase c = testing::make_decode_case(spec(3, 8, 2, 700, {700, 300, 0}, q_len, q_len > 1, 16));
    const DecodeTensors whole = c.host_tensors();
    const int B = c.problem.batch, Hq = c.problem.num_q_heads, D = c.problem.head_dim;
    // The middle shard of every sequence: keys [160, 480) clipped to its length.
    std::vector<int> lo(3), hi(3);
    std::vector<int32_t> offsets(3), totals(c.seq_lens.begin(), c.seq_lens.end());
    for (int b = 0; b < B; ++b) {
      lo[size_t(b)] = offsets[size_t(b)] = std::min(160, totals[size_t(b)]);
      hi[size_t(b)] = std::min(480, totals[size_t(b)]);
    }
    testing::DecodeShard middle = testing::paged_shard(c, lo, hi);
    std::vector<int32_t>& lens = middle.lens;
    std::vector<int32_t>& after = middle.keys_after;
    std::vector<int32_t>& table = middle.block_table;
    DecodeTensors shard = whole;
    shard.seq_lens.data = lens.data();
    shard.seq_lens_host = lens.data();
    shard.block_table.data = table.data();
    shard.block_table_host = table.data();
    const ref::Result want = ref::decode_shard(c.problem, shard, ref::Shard{offsets.data(), totals.data()});

    PlanOptions o;
    o.num_splits = 3;
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
    const int S = plan.num_splits();
    const int64_t rows = int64_t(B) * q_len;
    std::vector<float> po(size_t(S * rows * Hq * D), std::nanf("")), pl(size_t(S * rows * Hq), std::nanf(""));
    shard.keys_after = TensorRef::contiguous(after.data(), DType::kI32, {B});
    shard.out = shard.lse = TensorRef{};
    shard.partial_o = TensorRef::contiguous(po.data(), DType::kF32, {S, rows, Hq, D});
    shard.partial_lse = TensorRef::contiguous(pl.data(), DType::kF32, {S, rows, Hq});
    const Status st = cpu::run_decode(plan, shard);
    ASSERT_TRUE(st.ok()) << st.message();

    for (int b = 0; b < B; ++b)
      for (int i = 0; i < q_len; ++i)
        for (int h = 0; h < Hq; ++h) {
          const int64_t row = (int64_t(b) * q_len + i) * Hq + h;
          std::vector<double> lse(static_cast<size_t>(S));
          for (int s = 0; s < S; ++s) lse[size_t(s)] = pl[size_t(s * rows * Hq + row)];
          const double merged_lse = detail::combined_lse(lse.data(), S, 1);
          const double want_lse = want.lse[(size_t(b) * Hq + h) * q_len + i];
          if (std::isinf(want_lse)) {
            EXPECT_TRUE(std::isinf(merged_lse)) << "b " << b << " i " << i << " h " << h;
            continue;
          }
          EXPECT_NEAR(merged_lse, want_lse, 1e-4) << "b " << b << " i " << i << " h " << h;
          for (int j = 0; j < D; ++j) {
            double o = 0;
            for (int s = 0; s < S; ++s) o += detail::combine_weight(lse[size_t(s)], merged_lse) * po[size_t((s * rows * Hq + row) * D + j)];
            EXPECT_NEAR(o, want.out[((size_t(b) * q_len + i) * Hq + h) * D + j], 1e-4) << "b " << b << " j " << j;
          }
        }
  }
}

// keys_after lives in device memory the host does not check: a negative value makes that
// sequence's outputs NaN and leaves the other sequences alone.
TEST(ContextShards, NegativeKeysAfterGivesNaNForThatSequenceOnly) {
  testing::DecodeCase c = testing::make_decode_case(spec(2, 8, 2, 300, {300, 200}, 2, true, 16));
  testing::poison_outputs(c);
  std::vector<int32_t> after = {0, -1};
  DecodeTensors t = c.host_tensors();
  t.keys_after = TensorRef::contiguous(after.data(), DType::kI32, {2});
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  ASSERT_TRUE(cpu::run_decode(plan, t).ok());
  const int per_sequence = c.problem.q_len * c.problem.num_q_heads * c.problem.head_dim;
  for (int b = 0; b < 2; ++b) {
    int nans = 0;
    for (int k = 0; k < per_sequence; ++k) nans += std::isnan(detail::half_bits_to_float(c.out[size_t(b * per_sequence + k)], c.problem.dtype));
    EXPECT_EQ(nans, b == 1 ? per_sequence : 0) << "sequence " << b;
  }
}

// The partial outputs and keys_after are validated like every other tensor.
TEST(ContextShards, PartialAndShardTensorsAreValidated) {
  testing::DecodeCase c = testing::make_decode_case(spec(2, 8, 2, 100, {100, 50}, 1, false, 16));
  Plan plan;
  PlanOptions o;
  o.num_splits = 2;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
  std::vector<float> po(size_t(2 * 2 * 8 * 64)), pl(size_t(2 * 2 * 8));
  std::vector<int32_t> after(2, 0);
  std::vector<float> wrong(2);
  auto run = [&](auto edit) {
    DecodeTensors t = c.host_tensors();
    t.out = t.lse = TensorRef{};
    t.partial_o = TensorRef::contiguous(po.data(), DType::kF32, {2, 2, 8, 64});
    t.partial_lse = TensorRef::contiguous(pl.data(), DType::kF32, {2, 2, 8});
    t.keys_after = TensorRef::contiguous(after.data(), DType::kI32, {2});
    edit(t);
    return cpu::run_decode(plan, t);
  };
  EXPECT_TRUE(run([](DecodeTensors&) {}).ok());
  const std::pair<const char*, std::function<void(DecodeTensors&)>> bad[] = {
      {"partial_lse", [](DecodeTensors& t) { t.partial_lse = TensorRef{}; }},
      {"out", [&](DecodeTensors& t) { t.out = c.host_tensors().out; }},
      {"partial_o.shape[0]", [&](DecodeTensors& t) { t.partial_o.shape[0] = 3; }},
      {"partial_o.stride", [&](DecodeTensors& t) { t.partial_o.stride[1] = 8 * 64 + 1; }},
      {"keys_after.dtype", [&](DecodeTensors& t) { t.keys_after.dtype = DType::kF32; }},
      {"keys_after.shape[0]", [&](DecodeTensors& t) { t.keys_after.shape[0] = 3; }},
  };
  for (const auto& [arg, edit] : bad) {
    const Status s = run(edit);
    EXPECT_FALSE(s.ok()) << arg;
    EXPECT_NE(s.message().find(arg), std::string::npos) << arg << ": " << s.message();
  }
}

}  // namespace
}  // namespace splitkv
