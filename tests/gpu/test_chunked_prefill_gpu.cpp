// Chunked prefill over a KV cache on the GPU (PrefillProblem::kv_cache): the planner's family
// (prefill_sm90 on sm_90 where the build has it, else prefill_mma) or a named one against the fp64
// reference, for paged (pages of 16, 128 and 256 tokens, shuffled tables) and
// contiguous caches with NaN in every slot no sequence owns, ragged batches with empty members,
// chunks from 1 to 1000 queries over prefixes up to 4097 tokens, GQA, causal and not, forced
// splits, GQA packing, quantized caches (FP8, INT8, INT4, K8V4 and the keys-per-channel *_kc formats:
// dequantized into the workspace first; 300 short sequences beside one of 8,000 keys);
// bitwise-identical reruns; an invalid page id gives NaN in its own sequence only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "common/half_convert.hpp"
#include "testing/chunk_case.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv {
namespace {

using testing::ChunkCase;
using testing::DeviceBuffer;

struct ChunkShape {
  const char* name;
  int page_size;
  int hq, hkv, head_dim;
  DType dtype;
  bool causal;
  std::vector<int> seq_lens, chunks;
  int num_splits;          // 0: planned
  const char* family = "";  // "": the planner's choice (prefill_sm90 on sm_90 where compiled)
  KvFormat kv_format = KvFormat::kNative;
  bool head_major = false;  // the cache stored [slabs, Hkv, tokens, D]
  int sms = 0;              // > 0: planned for a device of that many SMs (a persistent grid of few blocks)
};

ChunkCase make_case(const ChunkShape& s) {
  testing::ChunkCaseSpec spec;
  DecodeProblem& d = spec.cache;
  d.batch = static_cast<int>(s.seq_lens.size());
  d.num_q_heads = s.hq;
  d.num_kv_heads = s.hkv;
  d.head_dim = s.head_dim;
  d.max_kv_len = *std::max_element(s.seq_lens.begin(), s.seq_lens.end());
  d.page_size = s.page_size;
  d.dtype = s.dtype;
  d.kv_format = s.kv_format;
  spec.seq_lens = s.seq_lens;
  spec.chunks = s.chunks;
  spec.causal = s.causal;
  spec.head_major_kv = s.head_major;
  return testing::make_chunk_case(spec);
}

Status plan_chunk(const ChunkCase& c, int num_splits, const char* family, Plan* plan, int sms = 0) {
  PlanOptions options;
  options.num_splits = num_splits;
  options.family = family;
  DeviceInfo device = gpu_test::device();
  if (sms > 0) device.sm_count = sms;
  return plan_prefill(c.problem, device, options, plan);
}

// Runs the plan on the device, leaving the outputs in c.
Status run_chunk(const Plan& plan, ChunkCase& c, testing::DeviceChunkCase& dev) {
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  if (Status s = run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr); !s) return s;
  dev.download_outputs(c);
  return Status::success();
}

class ChunkedPrefillVsReference : public ::testing::TestWithParam<ChunkShape> {};

TEST_P(ChunkedPrefillVsReference, MatchesFp64Reference) {
  const ChunkShape& s = GetParam();
  SPLITKV_REQUIRE_GPU(s.dtype, s.head_dim);
  ChunkCase c = make_case(s);
  Plan plan;
  const Status planned = plan_chunk(c, s.num_splits, s.family, &plan, s.sms);
  ASSERT_TRUE(planned.ok()) << planned.message();
  SPLITKV_REQUIRE_PLAN_COMPILED(plan);
  if (s.sms > 0) EXPECT_EQ(plan.persistent_blocks(), s.sms) << s.name;
  EXPECT_EQ(plan.dequantized_cache(), s.kv_format != KvFormat::kNative) << s.name;
  testing::DeviceChunkCase dev(c);
  const Status ran = run_chunk(plan, c, dev);
  ASSERT_TRUE(ran.ok()) << ran.message();
  const testing::Comparison cmp = testing::check_chunk(c);
  EXPECT_TRUE(cmp.passed) << s.name << " (" << plan.family() << ", " << plan.num_splits() << " splits): " << cmp.summary();

  // A second run gives the same bits.
  const std::vector<uint16_t> first = c.out;
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_TRUE(run_chunk(plan, c, dev).ok());
  EXPECT_EQ(c.out, first) << s.name << ": rerun differs";
}

const std::vector<int> kRagged = {4097, 0, 129, 17, 1000};
const std::vector<int> kRaggedChunks = {1000, 0, 129, 1, 127};

// A serving step's shape for the staging copy: 300 short sequences (1-40 keys, one query each)
// beside one of 8,000 keys (a chunk of 64): the copy's blocks number the 16-token items of the
// real lengths over two windows of 256 sequences, and the long sequence's 500 items spread over
// them. (The copy holds 301 x 8,000 tokens: 1.2 GB at one KV head.)
std::vector<int> many_short_one_long(bool chunks) {
  std::vector<int> v;
  for (int i = 0; i < 300; ++i) v.push_back(chunks ? 1 : 1 + (i * 7) % 40);
  v.push_back(chunks ? 64 : 8000);
  return v;
}

// More sequences (2,100, 0-24 keys, one query each) than the copy has blocks (2,048): a block
// checks several sequences' page ids and lengths, and numbers items over nine windows.
std::vector<int> more_sequences_than_blocks(bool chunks) {
  std::vector<int> v;
  for (int i = 0; i < 2100; ++i) {
    const int keys = (i * 11) % 25;
    v.push_back(chunks ? std::min(keys, 1) : keys);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ChunkedPrefillVsReference,
    ::testing::Values(
        ChunkShape{"page16_causal", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0},
        ChunkShape{"fp8_page16_300_short_rows_one_long", 16, 4, 1, 128, DType::kBF16, true,
                   many_short_one_long(false), many_short_one_long(true), 0, "", KvFormat::kFP8E4M3},
        ChunkShape{"int8_page16_2100_sequences", 16, 4, 1, 128, DType::kBF16, true,
                   more_sequences_than_blocks(false), more_sequences_than_blocks(true), 0, "", KvFormat::kInt8},
        ChunkShape{"page16_causal_mma", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_mma"},
        ChunkShape{"page32_d256", 32, 16, 16, 256, DType::kBF16, true, {700, 33}, {300, 33}, 0, "prefill_sm90"},
        ChunkShape{"page32_d256_n80", 32, 16, 16, 256, DType::kBF16, true, {700, 33}, {300, 33}, 0,
                   "prefill_sm90_n80"},
        ChunkShape{"contiguous_splits_d256_n80", 0, 8, 2, 256, DType::kF16, true, {4097, 700}, {256, 700}, 3,
                   "prefill_sm90_n80"},
        ChunkShape{"page256_causal", 256, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0},
        ChunkShape{"contiguous_causal", 0, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0},
        ChunkShape{"contiguous_causal_mma", 0, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_mma"},
        ChunkShape{"contiguous_full_fp16_d64", 0, 8, 1, 64, DType::kF16, false, kRagged, kRaggedChunks, 0},
        ChunkShape{"contiguous_splits", 0, 32, 8, 128, DType::kBF16, true, {4097, 700}, {256, 700}, 3},
        ChunkShape{"page16_full", 16, 28, 4, 128, DType::kBF16, false, kRagged, kRaggedChunks, 0},
        ChunkShape{"page16_fp16_d64", 16, 8, 1, 64, DType::kF16, true, kRagged, kRaggedChunks, 0},
        ChunkShape{"page16_fp16_d64_m192", 16, 8, 1, 64, DType::kF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_m192"},
        ChunkShape{"contiguous_splits_d64_m192", 0, 8, 2, 64, DType::kBF16, true, {4097, 700}, {256, 700}, 3,
                   "prefill_sm90_m192"},
        ChunkShape{"page16_splits", 16, 32, 8, 128, DType::kBF16, true, {4097, 700}, {256, 700}, 3},
        ChunkShape{"page256_chunk_longer_than_keys", 256, 32, 8, 128, DType::kBF16, true, {5, 300}, {9, 300}, 0},
        // Pages of whole K/V tiles (one TMA box per tile): a page per tile, several tiles per page
        // at D=64 (three consumers) and D=256 (64-key tiles), and splits that start mid-page.
        ChunkShape{"page128_full", 128, 28, 4, 128, DType::kBF16, false, kRagged, kRaggedChunks, 0},
        ChunkShape{"page256_fp16_d64_m192", 256, 8, 1, 64, DType::kF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_m192"},
        ChunkShape{"page256_d256", 256, 16, 16, 256, DType::kBF16, true, {700, 33}, {300, 33}, 0, "prefill_sm90"},
        ChunkShape{"page128_splits", 128, 32, 8, 128, DType::kBF16, true, {4097, 700}, {256, 700}, 3},
        // GQA packing: a tile holds a KV head's query heads (4 x 32 queries, 7 x 16, 8 x 16), chosen by
        // the planner for short chunks or named, over 16- and 256-token pages and a contiguous cache.
        ChunkShape{"page16_short_chunks_gqa", 16, 32, 8, 128, DType::kBF16, true, {4097, 0, 129, 17, 700},
                   {32, 0, 9, 1, 31}, 0},
        ChunkShape{"page16_causal_gqa", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_gqa"},
        ChunkShape{"page256_full_gqa_28_4", 256, 28, 4, 128, DType::kBF16, false, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_gqa"},
        ChunkShape{"contiguous_splits_gqa_fp16_d64", 0, 8, 1, 64, DType::kF16, true, {4097, 700}, {56, 20}, 3,
                   "prefill_sm90_gqa"},
        // Independent K and V tiles (128-key K tiles in two column slices, 64-key V tiles): 16-key boxes,
        // pages of whole tiles with splits that start mid-page, a contiguous cache; ragged last tiles
        // end in either V tile or before the second.
        ChunkShape{"page16_causal_v64", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_v64"},
        ChunkShape{"page128_splits_v64", 128, 32, 8, 128, DType::kBF16, true, {4097, 700}, {256, 700}, 3,
                   "prefill_sm90_v64"},
        ChunkShape{"contiguous_full_fp16_v64", 0, 28, 4, 128, DType::kF16, false, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_v64"},
        // 64-row packed tiles (one consumer, 64-key tiles, two blocks per SM): speculative-decode shapes
        // (28/4 x 8 queries: 56 rows; 8/1 x 8: the whole tile) with splits over 16-token pages, pages
        // of whole 64-key tiles with splits that start mid-page, ragged chunks, a contiguous cache.
        ChunkShape{"page16_spec_splits_gqa64_28_4", 16, 28, 4, 128, DType::kBF16, true, {3000, 0, 129, 17, 700},
                   {8, 0, 8, 1, 5}, 3, "prefill_sm90_gqa64"},
        ChunkShape{"page16_causal_gqa64", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_gqa64"},
        ChunkShape{"page64_splits_gqa64", 64, 32, 8, 128, DType::kBF16, true, {4097, 700}, {16, 700}, 3,
                   "prefill_sm90_gqa64"},
        ChunkShape{"contiguous_spec_fp16_gqa64_8_1", 0, 8, 1, 128, DType::kF16, true, {2000, 65}, {8, 8}, 5,
                   "prefill_sm90_gqa64"},
        ChunkShape{"contiguous_full_gqa64_28_4", 0, 28, 4, 128, DType::kBF16, false, kRagged, kRaggedChunks, 0,
                   "prefill_sm90_gqa64"},
        // Quantized caches: dequantized into the workspace, then read as a contiguous 16-bit cache.
        ChunkShape{"int8_page16_causal", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kInt8},
        ChunkShape{"int4_contiguous_causal", 0, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kInt4},
        ChunkShape{"fp8_page256_full", 256, 28, 4, 128, DType::kBF16, false, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kFP8E4M3},
        ChunkShape{"k8v4_page16_fp16_d64", 16, 8, 1, 64, DType::kF16, true, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kK8V4},
        ChunkShape{"int8_page32_d256", 32, 16, 16, 256, DType::kBF16, true, {700, 33}, {300, 33}, 0, "",
                   KvFormat::kInt8},
        ChunkShape{"int4_page16_splits", 16, 32, 8, 128, DType::kBF16, true, {4097, 700}, {256, 700}, 3, "",
                   KvFormat::kInt4},
        ChunkShape{"int8_contiguous_mma", 0, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_mma", KvFormat::kInt8},
        // Keys per channel (*_kc): complete groups from codes and group scales, the rest from the
        // 16-bit tail ring (every length here but 0 ends inside a group).
        ChunkShape{"int4kc_page64_causal", 64, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kInt4Kc},
        ChunkShape{"int8kc_contiguous_splits", 0, 32, 8, 128, DType::kBF16, true, {4097, 700}, {256, 700}, 3, "",
                   KvFormat::kInt8Kc},
        ChunkShape{"k8v4kc_page128_fp16_d64", 128, 8, 1, 64, DType::kF16, true, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kK8V4Kc},
        // Head-major caches ([slabs, Hkv, tokens, D] by strides): TMA boxes over 16-token pages and
        // over a contiguous cache with splits, the mma.sync loader, an INT4 cache's dequantization.
        ChunkShape{"head_major_page16_causal", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kNative, true},
        ChunkShape{"head_major_contiguous_splits", 0, 28, 4, 128, DType::kBF16, true, {4097, 700}, {256, 700}, 3, "",
                   KvFormat::kNative, true},
        ChunkShape{"head_major_page16_mma", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0,
                   "prefill_mma", KvFormat::kNative, true},
        ChunkShape{"head_major_int4_page16", 16, 32, 8, 128, DType::kBF16, true, kRagged, kRaggedChunks, 0, "",
                   KvFormat::kInt4, true},
        // A persistent grid of 3 blocks walking many tiles from the tile counter over 16-key boxes
        // from four producer warps (the tile id passed between them through shared memory).
        ChunkShape{"page16_on_3_blocks", 16, 16, 4, 128, DType::kBF16, true, {700, 33}, {300, 33}, 0,
                   "prefill_sm90", KvFormat::kNative, false, 3},
        ChunkShape{"page16_fp16_d64_m192_on_3_blocks", 16, 8, 2, 64, DType::kF16, true, {700, 33}, {400, 33}, 0,
                   "prefill_sm90_m192", KvFormat::kNative, false, 3}),
    [](const ::testing::TestParamInfo<ChunkShape>& info) { return std::string(info.param.name); });

// A page id outside the pool (no host copy to catch it) poisons that sequence's rows only, for a
// 16-bit cache read in 16-key boxes or in whole-tile pages, and for a quantized one (whose
// dequantization never reads outside the pool either).
struct BadPageCase {
  KvFormat format;
  int page_size;
};

class ChunkedPrefillBadPage : public ::testing::TestWithParam<BadPageCase> {};

TEST_P(ChunkedPrefillBadPage, InvalidPageIdGivesNaNForThatSequenceOnly) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  const BadPageCase& param = GetParam();
  ChunkShape shape{"bad_page", param.page_size, 32, 8, 128, DType::kBF16, true, {1100, 1000}, {40, 30}, 0, "",
                   param.format};
  ChunkCase c = make_case(shape);
  Plan plan;
  ASSERT_TRUE(plan_chunk(c, 0, "", &plan).ok());
  SPLITKV_REQUIRE_PLAN_COMPILED(plan);
  const int64_t pages_per_seq = c.cache.max_pages;
  c.cache.block_table[size_t(1) * pages_per_seq + 3] = 1 << 30;  // sequence 1, its 4th page
  testing::DeviceChunkCase dev(c);
  dev.tensors.block_table_host = nullptr;
  dev.tensors.seq_lens_host = nullptr;
  const Status ran = run_chunk(plan, c, dev);
  ASSERT_TRUE(ran.ok()) << ran.message();
  const int64_t hq = c.problem.num_q_heads, d = c.problem.head_dim;
  bool seq0_finite = true, seq1_nan = true;
  for (int64_t tok = 0; tok < c.cu_q.back(); ++tok) {
    for (int64_t j = 0; j < hq * d; ++j) {
      const float x = detail::half_bits_to_float(c.out[size_t(tok * hq * d + j)], DType::kBF16);
      if (tok < c.cu_q[1]) seq0_finite &= std::isfinite(x);
      else seq1_nan &= std::isnan(x);
    }
  }
  EXPECT_TRUE(seq0_finite);
  EXPECT_TRUE(seq1_nan);
}

INSTANTIATE_TEST_SUITE_P(Formats, ChunkedPrefillBadPage,
                         ::testing::Values(BadPageCase{KvFormat::kNative, 16}, BadPageCase{KvFormat::kNative, 256},
                                           BadPageCase{KvFormat::kInt4, 16}),
                         [](const ::testing::TestParamInfo<BadPageCase>& info) {
                           return std::string(to_string(info.param.format)) + "_page" +
                                  std::to_string(info.param.page_size);
                         });

}  // namespace
}  // namespace splitkv
