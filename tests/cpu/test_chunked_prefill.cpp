// Chunked prefill over a KV cache (PrefillProblem::kv_cache): the fp64 reference's definition, and
// the argument checks. A chunk of queries attends to its sequence's first seq_lens[b] cache
// tokens, causal aligned bottom-right; the reference must read exactly those tokens (NaN fills
// every other slot of the test caches) and agree bit for bit with the two definitions it
// generalizes: prefill over the same tokens gathered into K/V tensors, and decode (q_len <= 16).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "api/chunked_tensors.hpp"
#include "validate/validate.hpp"
#include "common/host_tensor.hpp"
#include "plan/geometry.hpp"
#include "reference/reference.hpp"
#include "splitkv/splitkv.hpp"
#include "testing/chunk_case.hpp"

namespace splitkv {
namespace {

using detail::element_offset;

using testing::ChunkCase;

ChunkCase make_chunk_case(int page_size, std::vector<int> lens, const std::vector<int>& chunks, bool causal,
                          bool varlen = true) {
  testing::ChunkCaseSpec spec;
  DecodeProblem& d = spec.cache;
  d.batch = static_cast<int>(lens.size());
  d.num_q_heads = 8;
  d.num_kv_heads = 2;
  d.head_dim = 64;
  d.max_kv_len = *std::max_element(lens.begin(), lens.end());
  d.page_size = page_size;
  d.dtype = DType::kBF16;
  spec.seq_lens = lens;
  spec.chunks = chunks;
  spec.causal = causal;
  spec.varlen = varlen;
  return testing::make_chunk_case(spec);
}

// The same attention over K/V token tensors: each sequence's first seq_lens[b] cache rows copied
// out (bf16 bits, packed varlen).
struct GatheredKv {
  std::vector<uint16_t> k, v;
  std::vector<int32_t> cu_k;
};

GatheredKv gather(ChunkCase& c) {
  const PrefillProblem& p = c.problem;
  const DecodeTensors cache = c.cache.host_tensors();
  GatheredKv g;
  g.cu_k = {0};
  for (int b = 0; b < p.batch; ++b) {
    const int len = c.cache.seq_lens[size_t(b)];
    for (int tok = 0; tok < len; ++tok) {
      int64_t page = b, slot = tok;
      if (p.page_size > 0) {
        page = c.cache.block_table[size_t(b) * c.cache.max_pages + tok / p.page_size];
        slot = tok % p.page_size;
      }
      for (int h = 0; h < p.num_kv_heads; ++h) {
        for (int j = 0; j < p.head_dim; ++j) {
          g.k.push_back(static_cast<const uint16_t*>(cache.k.data)[element_offset(cache.k, page, slot, h, j)]);
          g.v.push_back(static_cast<const uint16_t*>(cache.v.data)[element_offset(cache.v, page, slot, h, j)]);
        }
      }
    }
    g.cu_k.push_back(g.cu_k.back() + len);
  }
  return g;
}

ref::Result reference_over_gathered(const ChunkCase& c, GatheredKv& g) {
  PrefillProblem p = c.problem;
  p.kv_cache = false;
  p.page_size = 0;
  p.max_kv_len = std::max(1, p.max_kv_len);
  PrefillTensors t;
  const int64_t total_k = g.cu_k.back();
  t.q = c.tensors.q;
  t.out = c.tensors.out;
  t.k = TensorRef::contiguous(g.k.data(), DType::kBF16, {total_k, p.num_kv_heads, p.head_dim});
  t.v = TensorRef::contiguous(g.v.data(), DType::kBF16, {total_k, p.num_kv_heads, p.head_dim});
  t.cu_seqlens_q = c.tensors.cu_seqlens_q;
  t.cu_seqlens_k = TensorRef::contiguous(g.cu_k.data(), DType::kI32, {p.batch + 1});
  return ref::prefill(p, t);
}

TEST(ChunkedPrefillReference, ReadsExactlyTheSequencesCacheTokens) {
  // Ragged: an empty member, a chunk equal to its sequence (the plain causal triangle), a chunk
  // longer than its cached tokens (its first queries see no key), and long prefixes.
  const std::vector<int> lens = {600, 0, 129, 5, 300};
  const std::vector<int> chunks = {40, 0, 129, 9, 17};
  for (int page_size : {0, 16, 256}) {
    for (bool causal : {true, false}) {
      ChunkCase c = make_chunk_case(page_size, lens, chunks, causal);
      ASSERT_TRUE(detail::validate_prefill_problem(c.problem).ok());
      const Status valid = detail::validate_prefill_tensors(c.problem, c.tensors);
      ASSERT_TRUE(valid.ok()) << valid.message();
      const ref::Result over_cache = ref::prefill(c.problem, c.tensors);
      GatheredKv g = gather(c);
      const ref::Result over_tokens = reference_over_gathered(c, g);
      EXPECT_EQ(over_cache.out, over_tokens.out) << "page_size " << page_size << " causal " << causal;
      EXPECT_EQ(over_cache.lse, over_tokens.lse) << "page_size " << page_size << " causal " << causal;
      for (double x : over_cache.out) ASSERT_FALSE(std::isnan(x)) << "an unused cache slot reached the output";
      // Sequence 3 (5 keys, 9 queries, causal): its first 4 queries see no key.
      if (causal) {
        const int64_t row = c.cu_q[3];  // query 0 of sequence 3, head 0: LSE [Hq, total_q]
        EXPECT_TRUE(std::isinf(over_cache.lse[size_t(row)]) && over_cache.lse[size_t(row)] < 0);
      }
    }
  }
}

// Short chunks over every cache format: the same values as decode's reference, bit for bit.
TEST(ChunkedPrefillReference, EqualsDecodeForShortChunksInEveryFormat) {
  for (KvFormat format : {KvFormat::kNative, KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4,
                          KvFormat::kInt8Kc, KvFormat::kInt4Kc, KvFormat::kK8V4Kc}) {
    const bool channel_keys = detail::kv_format_traits(format).channel_keys;  // pages of whole key groups
    const testing::DecodeCaseSpec spec = testing::DecodeSpecBuilder(3, 8, 2, 400)
                                             .head_dim(64)
                                             .queries(6, true)
                                             .paged(channel_keys ? 64 : 16)
                                             .dtype(DType::kBF16)
                                             .format(format)
                                             .lens({400, 0, 77})
                                             .spec;
    const DecodeProblem& d = spec.problem;
    testing::DecodeCase c = testing::make_decode_case(spec);
    const DecodeTensors dt = c.host_tensors();

    const PrefillProblem p = plan::as_chunked_prefill(d);
    PrefillTensors t;
    t.q = dt.q;
    t.out = dt.out;
    detail::bind_decode_cache(dt, &t);
    const Status valid = detail::validate_prefill_tensors(p, t);
    ASSERT_TRUE(valid.ok()) << to_string(format) << ": " << valid.message();
    const ref::Result chunked = ref::prefill(p, t), decoded = ref::decode(d, dt);
    EXPECT_EQ(chunked.out, decoded.out) << to_string(format);
    EXPECT_EQ(chunked.lse, decoded.lse) << to_string(format);
  }
}

// Padded chunks (`splitkv verify --kv-cache`): the queries of equal varlen chunks laid out [batch,
// chunk, Hq, D]; the reference gives the same values (LSE [batch, Hq, chunk] instead of [Hq, total]).
TEST(ChunkedPrefillReference, PaddedChunksEqualVarlenChunks) {
  for (int page_size : {0, 16}) {
    const ChunkCase varlen = make_chunk_case(page_size, {300, 40}, {40, 40}, true);
    const ChunkCase padded = make_chunk_case(page_size, {300, 40}, {40, 40}, true, /*varlen=*/false);
    ASSERT_FALSE(padded.problem.varlen);
    const Status valid = detail::validate_prefill_tensors(padded.problem, padded.tensors);
    ASSERT_TRUE(valid.ok()) << valid.message();
    const ref::Result a = ref::prefill(varlen.problem, varlen.tensors);
    const ref::Result b = ref::prefill(padded.problem, padded.tensors);
    EXPECT_EQ(a.out, b.out) << "page_size " << page_size;
    const int batch = 2, Hq = padded.problem.num_q_heads, Lq = 40;
    ASSERT_EQ(b.lse.size(), size_t(batch * Hq * Lq));
    for (int s = 0; s < batch; ++s) {
      for (int h = 0; h < Hq; ++h) {
        for (int i = 0; i < Lq; ++i) {
          ASSERT_EQ(a.lse[size_t((h * batch + s) * Lq + i)], b.lse[size_t((s * Hq + h) * Lq + i)]) << page_size;
        }
      }
    }
  }
}

// Every new field is checked, with an error naming it; planning picks a family that reads caches.
TEST(ChunkedPrefillArguments, AreCheckedAndNamed) {
  auto expect = [](ChunkCase c, auto&& change, const char* argument) {
    change(c.problem, c.tensors);
    Status s = detail::validate_prefill_problem(c.problem);
    if (s.ok()) s = detail::validate_prefill_tensors(c.problem, c.tensors);
    EXPECT_EQ(s.argument(), argument) << s.message();
  };
  const ChunkCase paged = make_chunk_case(16, {100, 40}, {10, 40}, true);
  const ChunkCase contiguous = make_chunk_case(0, {100, 40}, {10, 40}, true);
  int32_t cu_k[3] = {0, 100, 140};
  int32_t too_long[2] = {100, 41};
  int32_t bad_page[64] = {};
  expect(paged, [](PrefillProblem& p, PrefillTensors&) { p.page_size = 8; }, "page_size");
  expect(paged, [&](PrefillProblem&, PrefillTensors& t) {
    t.cu_seqlens_k = TensorRef::contiguous(cu_k, DType::kI32, {3});
  }, "cu_seqlens_k");
  expect(paged, [](PrefillProblem&, PrefillTensors& t) { t.seq_lens = TensorRef{}; }, "seq_lens.data");
  expect(paged, [](PrefillProblem&, PrefillTensors& t) { t.block_table = TensorRef{}; }, "block_table.data");
  expect(contiguous, [&](PrefillProblem&, PrefillTensors& t) {
    t.block_table = TensorRef::contiguous(bad_page, DType::kI32, {2, 8});
  }, "block_table");
  expect(paged, [&](PrefillProblem& p, PrefillTensors& t) {
    p.max_kv_len = 100;
    too_long[1] = 101;
    t.seq_lens_host = too_long;
  }, "seq_lens[1]");
  expect(paged, [&](PrefillProblem&, PrefillTensors& t) {
    bad_page[0] = 1000;
    t.block_table_host = bad_page;
  }, "block_table[0][0]");
  expect(paged, [](PrefillProblem& p, PrefillTensors&) { p.kv_format = KvFormat::kInt8; }, "k.dtype");  // bf16 tensors
  expect(paged, [](PrefillProblem&, PrefillTensors& t) { t.q = TensorRef{}; }, "q.data");
  // Without kv_cache none of the cache fields may be set.
  expect(paged, [](PrefillProblem& p, PrefillTensors&) {
    p.kv_cache = false;
  }, "page_size");
  expect(contiguous, [](PrefillProblem& p, PrefillTensors&) { p.kv_cache = false; }, "seq_lens");

  // Families serve the cache layouts they read (prefill_mma and prefill_sm90: both); others say
  // why they cannot, naming the field that rules them out.
  Plan plan;
  for (const char* family : {"prefill_mma", "prefill_sm90"}) {
    PlanOptions named;
    named.family = family;
    Status s = plan_prefill(paged.problem, DeviceInfo::h200(), named, &plan);
    EXPECT_TRUE(s.ok()) << family << ": " << s.message();
    s = plan_prefill(contiguous.problem, DeviceInfo::h200(), named, &plan);
    EXPECT_TRUE(s.ok()) << family << ": " << s.message();
  }
  Status s = plan_prefill(paged.problem, DeviceInfo::h200(), {}, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  PlanOptions split_v;
  split_v.strategy = Strategy::kSplitV;
  s = plan_prefill(contiguous.problem, DeviceInfo::h200(), split_v, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.argument(), "kv_cache") << s.message();
}

// A quantized cache is dequantized into a 16-bit staging copy at the start of the workspace, which
// the family (the same as for a 16-bit contiguous cache) then reads; the prefill's own workspace
// (split partials) follows it.
TEST(ChunkedPrefillPlan, QuantizedCachesAreDequantizedIntoTheWorkspaceFirst) {
  const ChunkCase paged = make_chunk_case(16, {100, 40}, {10, 40}, true);
  const PrefillProblem native = paged.problem;
  Plan plain;
  ASSERT_TRUE(plan_prefill(native, DeviceInfo::h200(), {}, &plain).ok());
  EXPECT_FALSE(plain.dequantized_cache());
  EXPECT_EQ(plain.staging_bytes(), 0u);
  for (KvFormat format : {KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    PrefillProblem quantized = native;
    quantized.kv_format = format;
    for (int splits : {1, 3}) {
      PlanOptions options;
      options.num_splits = splits;
      options.tuning.mixed_route = false;  // the one call's layout (the route adds its parts after it)
      Plan plan;
      const Status s = plan_prefill(quantized, DeviceInfo::h200(), options, &plan);
      ASSERT_TRUE(s.ok()) << to_string(format) << ": " << s.message();
      EXPECT_TRUE(plan.dequantized_cache()) << to_string(format);
      EXPECT_EQ(plan.family(), plain.family()) << to_string(format);  // the 16-bit cache's family
      // K and V of batch x max_kv_len x Hkv x D 16-bit values, and the lengths, then the partials.
      const size_t values = size_t(native.batch) * native.max_kv_len * native.num_kv_heads * native.head_dim;
      EXPECT_GE(plan.staging_bytes(), 2 * values * 2 + native.batch * sizeof(int32_t));
      Plan same_splits;
      PlanOptions forced = options;
      ASSERT_TRUE(plan_prefill(native, DeviceInfo::h200(), forced, &same_splits).ok());
      EXPECT_EQ(plan.num_splits(), same_splits.num_splits());
      EXPECT_EQ(plan.workspace_bytes(), plan.staging_bytes() + same_splits.workspace_bytes()) << to_string(format);
      EXPECT_NE(plan.note().find("dequantized"), std::string::npos) << plan.note();
      EXPECT_NE(describe(plan).find("cache: dequantized to bf16"), std::string::npos) << describe(plan);
    }
    // Any family that reads a contiguous 16-bit cache serves it (the sm80 one by name, or on sm_80).
    PlanOptions mma;
    mma.family = "prefill_mma";
    Plan plan;
    ASSERT_TRUE(plan_prefill(quantized, DeviceInfo::h200(), mma, &plan).ok());
    EXPECT_TRUE(plan.dequantized_cache());
  }
}

}  // namespace
}  // namespace splitkv
