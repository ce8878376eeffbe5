// The mixed route (PlanTuning::mixed_route, docs/MIXED_BATCH.md) on the GPU: a serving step's
// varlen batch over a paged cache with decode rows (1-4 queries), speculative rows, chunks longer
// than a tile, an empty sequence and rows over fewer keys than queries (and steps of chunks alone,
// or of many decode rows ahead of one chunk), served by the decode kernels
// beside the chunked-prefill kernels in one call (side by side, and serial: mixed_route_serial);
// against the fp64 reference with outputs and workspace poisoned, the same bits on a rerun, and a
// CUDA graph captured once and replayed with new lengths; hostile device data (a page id outside
// the pool in a decode row and in a chunk, a speculative row's length past max_kv_len) gives NaN in
// those sequences only, every other sequence's bits unchanged; and one plan gives a sequence the same
// bits whatever its batch-mates' lengths.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/chunk_case.hpp"

namespace splitkv {
namespace {

using testing::ChunkCase;
using testing::DeviceBuffer;

struct MixShape {
  const char* name;
  int page_size;
  KvFormat kv_format;
  std::vector<int> seq_lens, chunks;
  int window_left = -1;
  bool serial = false;  // PlanTuning::mixed_route_serial: the parts one after the other
};

ChunkCase make_mix(const MixShape& s) {
  testing::ChunkCaseSpec spec;
  DecodeProblem& d = spec.cache;
  d.batch = static_cast<int>(s.seq_lens.size());
  d.num_q_heads = 32;
  d.num_kv_heads = 8;
  d.head_dim = 128;
  d.max_kv_len = *std::max_element(s.seq_lens.begin(), s.seq_lens.end());
  d.page_size = s.page_size;
  d.dtype = DType::kBF16;
  d.kv_format = s.kv_format;
  spec.seq_lens = s.seq_lens;
  spec.chunks = s.chunks;
  ChunkCase c = testing::make_chunk_case(spec);
  c.problem.window_left = s.window_left;
  if (s.window_left >= 0) c.problem.window_right = 0;
  return c;
}

Status plan_mix(const ChunkCase& c, Plan* plan, bool serial = false) {
  PlanOptions o;
  o.tuning.mixed_route = true;
  o.tuning.mixed_route_serial = serial;
  return plan_prefill(c.problem, gpu_test::device(), o, plan);
}

// Sequence b's output elements in c.out against `before` (the same rows from another run): how
// many there are, how many differ, how many are NaN, and the first that differs (-1: none).
struct SequenceBits {
  int64_t elements = 0, changed = 0, nan = 0, first_changed = -1;
};
SequenceBits compare_sequence_bits(const ChunkCase& c, int b, const std::vector<uint16_t>& before) {
  const int64_t row = int64_t(c.problem.num_q_heads) * c.problem.head_dim;
  SequenceBits r;
  for (int64_t e = int64_t(c.cu_q[size_t(b)]) * row; e < int64_t(c.cu_q[size_t(b) + 1]) * row; ++e, ++r.elements) {
    const bool differs = c.out[size_t(e)] != before[size_t(e)];
    r.changed += differs;
    r.nan += std::isnan(detail::half_bits_to_float(c.out[size_t(e)], DType::kBF16));
    if (differs && r.first_changed < 0) r.first_changed = e;
  }
  return r;
}

// 70 single-query decode rows (more than two warps' worth of sequences ahead of the chunk, which
// the prefill part's blocks pass over in one step each), a chunk of 300 queries, 10 more rows.
std::vector<int> many_rows(bool chunks) {
  std::vector<int> v;
  for (int b = 0; b < 81; ++b) {
    const bool chunk = b == 70;
    v.push_back(chunks ? (chunk ? 300 : 1) : (chunk ? 2400 : 200 + 37 * b));
  }
  return v;
}

// Decode rows of 1-4 queries (group 4: 16 packed rows), a speculative row of 3, chunks of 300 and
// 64 queries, an empty sequence, and a sequence of 2 queries over 1 key (its first row sees nothing).
const MixShape kMixes[] = {
    {"bf16_paged16", 16, KvFormat::kNative, {3000, 500, 2348, 64, 1, 7000, 900, 20, 1}, {1, 4, 300, 64, 1, 3, 0, 2, 2}},
    {"bf16_paged64_window", 64, KvFormat::kNative, {3000, 500, 2348, 640, 7000}, {1, 4, 300, 64, 2}, 256},
    {"fp8_paged16", 16, KvFormat::kFP8E4M3, {3000, 500, 2348, 64, 7000, 33}, {1, 4, 300, 64, 3, 1}},
    {"int4_paged32", 32, KvFormat::kInt4, {2000, 4096, 1500, 77}, {2, 1, 200, 4}},
    // Decode rows behind a chunk and an empty row: slots in their parts other than their index.
    {"bf16_chunk_first", 16, KvFormat::kNative, {2348, 64, 3000, 500, 700, 90}, {300, 0, 1, 4, 1, 2}},
    // Chunks only: no decode row, so the prefill part's whole persistent grid walks the tiles.
    {"bf16_chunks_only", 16, KvFormat::kNative, {3000, 2348, 700, 1200}, {300, 64, 200, 17}},
    {"bf16_many_rows_then_chunk", 16, KvFormat::kNative, many_rows(false), many_rows(true)},
    // The serial route: the same parts on one stream.
    {"bf16_paged16_serial", 16, KvFormat::kNative, {3000, 500, 2348, 64, 1, 7000, 900, 20, 1},
     {1, 4, 300, 64, 1, 3, 0, 2, 2}, -1, true},
    {"fp8_paged16_serial", 16, KvFormat::kFP8E4M3, {3000, 500, 2348, 64, 7000, 33}, {1, 4, 300, 64, 3, 1}, -1, true},
};

class MixedRouteVsReference : public ::testing::TestWithParam<MixShape> {};

TEST_P(MixedRouteVsReference, MatchesFp64ReferenceAndReplays) {
  const MixShape& s = GetParam();
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  if (gpu_test::device().cc_major < 9) GTEST_SKIP() << "the mixed route runs on sm_90";
  ChunkCase c = make_mix(s);
  Plan plan;
  const Status planned = plan_mix(c, &plan, s.serial);
  ASSERT_TRUE(planned.ok()) << planned.message();
  SPLITKV_REQUIRE_PLAN_COMPILED(plan);
  // The route is taken only where this build holds its decode parts' kernels too.
  if (!plan.mixed_route() && plan.note().find("in this build") != std::string::npos) {
    GTEST_SKIP() << "the decode parts' kernels are not compiled into this build: " << describe(plan);
  }
  ASSERT_TRUE(plan.mixed_route()) << describe(plan);
  ASSERT_EQ(plan.mixed_serial(), s.serial);
  testing::DeviceChunkCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_chunk(c);
  EXPECT_TRUE(cmp.passed) << s.name << ": " << cmp.summary() << "\n" << describe(plan);
  const std::vector<uint16_t> eager = c.out;

  // The same call captured once: its replay gives the eager bits, and a replay with shorter
  // lengths (decode rows and chunks alike; a decode row under its query count) the reference.
  gpu_test::CapturedCall graph([&](cudaStream_t stream) {
    return run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), stream);
  });
  ASSERT_TRUE(graph.ok()) << graph.error();
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_EQ(graph.replay(), cudaSuccess);
  dev.download_outputs(c);
  EXPECT_EQ(c.out, eager) << s.name << ": the replay differs from the eager call";
  std::vector<int32_t> shorter(c.cache.seq_lens.begin(), c.cache.seq_lens.end());
  for (size_t b = 0; b < shorter.size(); ++b) shorter[b] = std::max<int32_t>(shorter[b] * 2 / 3, b == 1 ? 2 : 0);
  std::copy(shorter.begin(), shorter.end(), c.cache.seq_lens.begin());
  dev.cache.upload_seq_lens(shorter);
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_EQ(graph.replay(), cudaSuccess);
  dev.download_outputs(c);
  const testing::Comparison replayed = testing::check_chunk(c);
  EXPECT_TRUE(replayed.passed) << s.name << " replayed with shorter lengths: " << replayed.summary();
}

INSTANTIATE_TEST_SUITE_P(Mixes, MixedRouteVsReference, ::testing::ValuesIn(kMixes),
                         [](const ::testing::TestParamInfo<MixShape>& info) { return std::string(info.param.name); });

TEST(MixedRouteHostile, BadDeviceDataPoisonsItsOwnSequencesOnly) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  if (gpu_test::device().cc_major < 9) GTEST_SKIP() << "the mixed route runs on sm_90";
  // Decode rows (0, 3, 5), a speculative row of 4 (1) and of 3 (4), a chunk of 300 (2).
  const MixShape shape{"hostile", 16, KvFormat::kNative, {3000, 500, 2348, 900, 7000, 64}, {1, 4, 300, 1, 3, 1}};
  ChunkCase c = make_mix(shape);
  Plan plan;
  ASSERT_TRUE(plan_mix(c, &plan).ok());
  ASSERT_TRUE(plan.mixed_route()) << describe(plan);
  SPLITKV_REQUIRE_PLAN_COMPILED(plan);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  std::vector<uint16_t> clean;
  {
    testing::DeviceChunkCase dev(c);
    ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dev.download_outputs(c);
    const testing::Comparison cmp = testing::check_chunk(c);
    ASSERT_TRUE(cmp.passed) << cmp.summary();
    clean = c.out;
  }
  const int64_t pages = c.cache.max_pages;
  c.cache.block_table[size_t(0 * pages + 3)] = 1 << 30;  // the decode row's 4th page
  c.cache.block_table[size_t(2 * pages + 5)] = -7;       // the chunk's 6th page
  testing::DeviceChunkCase dev(c);
  dev.tensors.block_table_host = nullptr;
  dev.tensors.seq_lens_host = nullptr;
  std::vector<int32_t> lens(c.cache.seq_lens.begin(), c.cache.seq_lens.end());
  ASSERT_LT(int64_t(c.problem.max_kv_len) + 1, pages * 16) << "the bad length must lie inside the capacity";
  lens[4] = c.problem.max_kv_len + 1;  // the speculative row of 3: past max_kv_len
  dev.cache.upload_seq_lens(lens);
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dev.download_outputs(c);
  for (int b = 0; b + 1 < int(c.cu_q.size()); ++b) {
    const bool bad = b == 0 || b == 2 || b == 4;
    const SequenceBits bits = compare_sequence_bits(c, b, clean);
    if (bad) {
      EXPECT_EQ(bits.nan, bits.elements) << "sequence " << b << " has bad device data: every output NaN";
    } else {
      EXPECT_EQ(bits.changed, 0) << "sequence " << b << " is healthy: its bits must not change";
    }
  }
}

// One plan for the step's bounds serves every mix (one captured graph): a sequence's rows are the
// same bits whatever its batch-mates' lengths. A decode row (0), a speculative row (1) and a chunk
// (2) keep their lengths while other sequences' key counts change: each mate alone (so that a
// failure names the change that moved the bits), all of them at once, and all of them on the serial
// route (the parts one after the other: a failure only side by side points at the overlap).
struct MateChange {
  const char* name;
  std::vector<std::pair<int, int32_t>> lens;  // (sequence, its new key count)
  bool serial = false;
};
const MateChange kMateChanges[] = {
    {"decode_mate_empty", {{3, 0}}},
    {"speculative_mate_shorter", {{4, 2000}}},
    {"decode_mate_longer", {{5, 5000}}},
    {"chunk_mate_shorter", {{6, 600}}},
    {"every_mate", {{3, 0}, {4, 2000}, {5, 5000}, {6, 600}}},
    {"every_mate_serial", {{3, 0}, {4, 2000}, {5, 5000}, {6, 600}}, true},
};

class MixedRouteInvariance : public ::testing::TestWithParam<MateChange> {};

TEST_P(MixedRouteInvariance, ASequencesBitsDoNotDependOnItsBatchMates) {
  const MateChange& change = GetParam();
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  if (gpu_test::device().cc_major < 9) GTEST_SKIP() << "the mixed route runs on sm_90";
  // The case holds each sequence's keys up to the longer of its two lengths (the cache's slots past
  // a sequence's keys are NaN, which a lengthened mate would otherwise read), and the first run
  // uses the first lengths.
  const std::vector<int32_t> first_lens = {3000, 500, 2348, 900, 7000, 64, 1200};
  MixShape shape{"mates", 16, KvFormat::kNative, {}, {1, 4, 300, 1, 3, 1, 90}};
  shape.seq_lens.assign(first_lens.begin(), first_lens.end());
  for (const auto& [b, n] : change.lens) shape.seq_lens[size_t(b)] = std::max(shape.seq_lens[size_t(b)], int(n));
  ChunkCase c = make_mix(shape);
  std::copy(first_lens.begin(), first_lens.end(), c.cache.seq_lens.begin());
  Plan plan;
  ASSERT_TRUE(plan_mix(c, &plan, change.serial).ok());
  ASSERT_TRUE(plan.mixed_route()) << describe(plan);
  SPLITKV_REQUIRE_PLAN_COMPILED(plan);
  testing::DeviceChunkCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_chunk(c);
  ASSERT_TRUE(cmp.passed) << cmp.summary();
  const std::vector<uint16_t> first = c.out;

  std::vector<int32_t> lens = first_lens;
  std::vector<bool> kept(lens.size(), true);
  for (const auto& [b, n] : change.lens) lens[size_t(b)] = n, kept[size_t(b)] = false;
  dev.tensors.seq_lens_host = nullptr;
  dev.cache.upload_seq_lens(lens);
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dev.download_outputs(c);
  auto value = [&](const std::vector<uint16_t>& out, int64_t e) {
    return e < 0 ? 0.f : detail::half_bits_to_float(out[size_t(e)], DType::kBF16);
  };
  for (int b = 0; b < int(lens.size()); ++b) {
    if (!kept[size_t(b)]) continue;
    const SequenceBits bits = compare_sequence_bits(c, b, first);
    EXPECT_EQ(bits.changed, 0) << change.name << ": sequence " << b << "'s bits moved with its mates' lengths ("
                               << bits.nan << " NaN; first at element " << bits.first_changed << ": "
                               << value(first, bits.first_changed) << " -> " << value(c.out, bits.first_changed)
                               << ")\n" << describe(plan);
  }
  // The mates themselves against the reference at their new lengths.
  std::copy(lens.begin(), lens.end(), c.cache.seq_lens.begin());
  const testing::Comparison mates = testing::check_chunk(c);
  EXPECT_TRUE(mates.passed) << change.name << " with the new lengths: " << mates.summary();
}

INSTANTIATE_TEST_SUITE_P(Mates, MixedRouteInvariance, ::testing::ValuesIn(kMateChanges),
                         [](const ::testing::TestParamInfo<MateChange>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace splitkv
