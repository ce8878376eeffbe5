// Prefill kernel families (default, split-KV, split-V, two-pass, independent K/V tiles on mma.sync and
// on wgmma) against the fp64 reference, with the tolerance rule of docs/BENCHMARKING.md.
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

using gpu_test::run_prefill_poisoned;

struct Variant {
  const char* name;
  Strategy strategy;
  const char* family;  // "": the planner's choice
  int num_splits;
};
// "default" and "splitkv" run the planner's family (prefill_sm90 on an H200 that has it).
const Variant kVariants[] = {{"default", Strategy::kAuto, "", 0},
                             {"splitkv", Strategy::kSplitKV, "", 3},
                             {"sm90", Strategy::kAuto, "prefill_sm90", 0},
                             {"sm90_splitkv", Strategy::kSplitKV, "prefill_sm90", 2},
                             {"sm90_m192", Strategy::kAuto, "prefill_sm90_m192", 0},
                             {"sm90_m192_splitkv", Strategy::kSplitKV, "prefill_sm90_m192", 2},
                             {"sm90_n80", Strategy::kAuto, "prefill_sm90_n80", 0},
                             {"sm90_n80_splitkv", Strategy::kSplitKV, "prefill_sm90_n80", 2},
                             {"mma", Strategy::kAuto, "prefill_mma", 0},
                             {"mma_splitkv", Strategy::kSplitKV, "prefill_mma", 3},
                             {"splitv", Strategy::kSplitV, "", 0},
                             {"twopass", Strategy::kTwoPass, "", 0},
                             {"sm90_twopass", Strategy::kTwoPass, "prefill_sm90_twopass", 0},
                             {"sm90_gqa", Strategy::kAuto, "prefill_sm90_gqa", 0},
                             {"sm90_gqa_splitkv", Strategy::kSplitKV, "prefill_sm90_gqa", 2},
                             {"sm90_v64", Strategy::kAuto, "prefill_sm90_v64", 0},
                             {"sm90_v64_splitkv", Strategy::kSplitKV, "prefill_sm90_v64", 2},
                             {"sm90_gqa64", Strategy::kAuto, "prefill_sm90_gqa64", 0},
                             {"sm90_gqa64_splitkv", Strategy::kSplitKV, "prefill_sm90_gqa64", 3},
                             {"k16v64", Strategy::kAuto, "prefill_mma_k16v64", 0},
                             {"k16v64_splitkv", Strategy::kSplitKV, "prefill_mma_k16v64", 2}};

struct PrefillShape {
  std::string name;
  testing::PrefillCaseSpec spec;
};

PrefillShape padded(std::string name, int batch, int hq, int hkv, int lq, int lk, bool causal, int d = 128,
                    DType dtype = DType::kBF16) {
  return {std::move(name), testing::padded_prefill_spec(batch, hq, hkv, lq, lk, causal, d, dtype)};
}

PrefillShape varlen(std::string name, int hq, int hkv, std::vector<int> q_lens, std::vector<int> kv_lens, bool causal,
                    int d = 128, DType dtype = DType::kBF16) {
  return {std::move(name), testing::varlen_prefill_spec(hq, hkv, std::move(q_lens), std::move(kv_lens), causal, d, dtype)};
}

std::vector<PrefillShape> shapes() {
  std::vector<PrefillShape> v;
  for (int len : {1, 17, 127, 129, 1000}) v.push_back(padded("len" + std::to_string(len), 2, 4, 4, len, len, false));
  v.push_back(padded("len4097_causal", 1, 2, 2, 4097, 4097, true));
  // A length that is no multiple of the K/V tile but a multiple of 32, and a causal chunk whose rows
  // start masking in different tiles.
  v.push_back(padded("len96", 2, 4, 4, 96, 96, false));
  v.push_back(padded("causal_192_of_673", 1, 4, 4, 192, 673, true));
  v.push_back(padded("causal_square_1000", 1, 4, 2, 1000, 1000, true));
  v.push_back(padded("causal_lq_lt_lk", 2, 4, 4, 129, 700, true));
  v.push_back(padded("causal_lq_gt_lk", 1, 4, 4, 200, 65, true));  // rows seeing no key
  v.push_back(padded("gqa_32_8", 1, 32, 8, 300, 300, true));
  v.push_back(padded("gqa_28_4", 1, 28, 4, 257, 257, false));
  v.push_back(padded("mqa_8_1", 2, 8, 1, 190, 300, true));
  // GQA packing's tile shapes: 3 heads of 40 queries (120 of 128 rows), 12 of 8 (96 rows), 16 of 8
  // (every row), short chunks at the end of longer keys, fp16 at D=64 and D=256.
  v.push_back(padded("gqa_6_2_causal", 1, 6, 2, 100, 333, true));
  v.push_back(padded("gqa_12_1_chunk_45", 2, 12, 1, 45, 300, true));
  v.push_back(padded("gqa_16_1_chunk_20", 1, 16, 1, 20, 150, false));
  v.push_back(padded("gqa_32_8_chunk_32", 2, 32, 8, 32, 1000, true, 64, DType::kF16));
  v.push_back(padded("gqa_16_4_chunk_9_hd256", 1, 16, 4, 9, 200, true, 256));
  v.push_back(padded("hd256_bf16", 2, 4, 2, 300, 300, false, 256));
  v.push_back(padded("hd256_fp16_causal_lq_lt_lk", 1, 4, 4, 200, 333, true, 256, DType::kF16));
  // D=256 shapes for the 80-key tile: a length of whole tiles plus one key, rows that see no key.
  v.push_back(padded("hd256_bf16_causal_1041", 1, 2, 2, 1041, 1041, true, 256));
  v.push_back(padded("hd256_fp16_causal_lq_gt_lk", 1, 2, 2, 300, 81, true, 256, DType::kF16));
  v.push_back(varlen("hd256_varlen", 2, 1, {1, 0, 161, 17}, {1, 80, 400, 79}, false, 256));
  v.push_back(padded("hd64_fp16", 2, 4, 2, 333, 333, false, 64, DType::kF16));
  v.push_back(padded("hd64_bf16_causal", 1, 6, 3, 500, 520, true, 64));
  // D=64 shapes for the three-consumer tile (192 query rows: one row past a block, rows that see
  // no key, empty and one-token members, a ragged last K/V tile).
  v.push_back(padded("hd64_fp16_causal_4097", 1, 2, 2, 4097, 4097, true, 64, DType::kF16));
  v.push_back(padded("hd64_bf16_causal_193_of_1000", 1, 4, 4, 193, 1000, true, 64));
  v.push_back(padded("hd64_fp16_causal_lq_gt_lk", 1, 4, 4, 400, 129, true, 64, DType::kF16));
  v.push_back(varlen("hd64_varlen_causal", 4, 2, {1, 17, 0, 385, 127}, {1, 17, 9, 400, 1000}, true, 64, DType::kF16));
  v.push_back(padded("hd128_fp16", 1, 4, 4, 260, 200, false, 128, DType::kF16));
  v.push_back(varlen("varlen_with_empty", 4, 2, {100, 0, 17, 300}, {130, 5, 0, 300}, false));
  v.push_back(varlen("varlen_causal", 8, 2, {1, 64, 129, 0, 250}, {1, 200, 129, 7, 250}, true));
  // One query head and one sequence: O's unit dimensions carry strides TMA could not take as given.
  v.push_back(padded("one_head_one_query", 1, 1, 1, 1, 33, false));
  v.push_back(padded("one_head_causal_70", 1, 1, 1, 70, 90, true));
  PrefillShape strided = padded("strided", 2, 4, 2, 150, 170, true);
  strided.spec.strided = true;
  v.push_back(strided);
  return v;
}

struct PrefillParam {
  PrefillShape shape;
  Variant variant;
};

std::vector<PrefillParam> params() {
  std::vector<PrefillParam> out;
  for (const PrefillShape& s : shapes()) {
    for (const Variant& v : kVariants) {
      const bool study_strategy = v.strategy == Strategy::kSplitV || v.strategy == Strategy::kTwoPass;
      if (gpu_test::prefill_family_serves(v.family, s.spec.problem) && !(s.spec.problem.head_dim > 128 && study_strategy)) {
        out.push_back({s, v});
      }
    }
  }
  return out;
}

class PrefillVsReference : public ::testing::TestWithParam<PrefillParam> {};

TEST_P(PrefillVsReference, MatchesFp64Reference) {
  const PrefillParam& param = GetParam();
  SPLITKV_REQUIRE_GPU(param.shape.spec.problem.dtype, param.shape.spec.problem.head_dim);
  PlanOptions o;
  o.strategy = param.variant.strategy;
  o.family = param.variant.family;
  o.num_splits = param.variant.num_splits;
  for (float q_scale : {1.f, 6.f}) {
    testing::PrefillCaseSpec spec = param.shape.spec;
    spec.q_scale = q_scale;
    testing::PrefillCase c = testing::make_prefill_case(spec);
    Plan plan;
    Status s = plan_prefill(c.problem, gpu_test::device(), o, &plan);
    ASSERT_TRUE(s.ok()) << s.message();
    SPLITKV_REQUIRE_PLAN_COMPILED(plan);
    testing::DevicePrefillCase dev(c);
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    ASSERT_TRUE(run_prefill_poisoned(plan, c, dev, workspace));
    const testing::Comparison cmp = testing::check_prefill(c);
    EXPECT_TRUE(cmp.passed) << "q_scale=" << q_scale << " splits=" << plan.num_splits() << ": " << cmp.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PrefillVsReference, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<PrefillParam>& info) {
                           return info.param.shape.name + "_" + info.param.variant.name;
                         });

TEST(PrefillGpu, ResultsAreBitwiseIdenticalRunToRun) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (int splits : {1, 3}) {
    PrefillShape s = varlen("rerun", 8, 2, {300, 0, 129}, {700, 5, 129}, true);
    testing::PrefillCase c = testing::make_prefill_case(s.spec);
    PlanOptions o;
    o.num_splits = splits;
    if (splits > 1) o.strategy = Strategy::kSplitKV;
    Plan plan;
    ASSERT_TRUE(plan_prefill(c.problem, gpu_test::device(), o, &plan).ok());
    SPLITKV_REQUIRE_PLAN_COMPILED(plan);
    std::vector<uint16_t> first;
    for (int run = 0; run < 2; ++run) {
      testing::poison_outputs(c);
      testing::DevicePrefillCase dev(c);
      DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
      ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
      dev.download_outputs(c);
      EXPECT_TRUE(testing::check_prefill(c).passed) << plan.family();
      if (run == 0) first = c.out;
    }
    EXPECT_EQ(first, c.out) << plan.family() << " splits " << splits;
  }
}

// A persistent grid of 1 or 3 blocks walks every tile (many per block): the static stride on
// uniform tiles, the tile counter on causal and ragged ones, with splits, D=64's 192-row tile; a
// second call on the same workspace (the counter left non-zero by the first) gives the same bits,
// and so does one block per tile (persistent_prefill off): the grid never changes a tile's bits
// (with whole tiles: a stream-K tail merges cut tiles from two parts, StreamKTail).
TEST(PrefillGpu, PersistentGridOfFewBlocksWalksEveryTile) {
  struct Case {
    PrefillShape shape;
    const char* family;
    int num_splits;
    bool dynamic;
  };
  const Case cases[] = {
      {padded("uniform", 2, 4, 4, 1000, 1000, false), "prefill_sm90", 0, false},
      {padded("uniform_splits", 1, 4, 2, 300, 1500, false), "prefill_sm90", 2, false},
      {varlen("ragged_causal", 8, 2, {1, 64, 129, 0, 250}, {1, 200, 129, 7, 250}, true), "prefill_sm90", 0, true},
      {padded("causal_gqa_splits", 1, 8, 2, 700, 700, true), "prefill_sm90", 2, true},
      {padded("causal_d64_192_rows", 1, 4, 2, 1000, 1000, true, 64, DType::kF16), "prefill_sm90_m192", 0, true},
      {padded("causal_gqa_packed", 2, 32, 8, 100, 900, true), "prefill_sm90_gqa", 0, true},
      {padded("uniform_gqa_packed_splits", 1, 28, 4, 60, 1500, false), "prefill_sm90_gqa", 2, false},
  };
  for (const Case& k : cases) {
    const PrefillProblem& problem = k.shape.spec.problem;
    if (!gpu_test::compiled(problem.dtype, problem.head_dim) || !testing::gpu_available()) continue;
    for (int sms : {1, 3}) {
      DeviceInfo few = gpu_test::device();
      if (few.cc_major < 9) GTEST_SKIP() << "prefill_sm90 needs sm_90";
      few.sm_count = sms;
      PlanOptions o;
      o.family = k.family;
      o.num_splits = k.num_splits;
      o.tuning.stream_k_prefill = false;
      if (k.num_splits > 1) o.strategy = Strategy::kSplitKV;
      Plan plan;
      const Status planned = plan_prefill(problem, few, o, &plan);
      ASSERT_TRUE(planned.ok()) << planned.message();
      if (!gpu_test::plan_compiled(plan)) continue;
      EXPECT_EQ(plan.persistent_blocks(), sms) << k.shape.name;
      EXPECT_EQ(plan.dynamic_tiles(), k.dynamic) << k.shape.name;
      testing::PrefillCase c = testing::make_prefill_case(k.shape.spec);
      testing::DevicePrefillCase dev(c);
      DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
      std::vector<uint16_t> first;
      for (int run = 0; run < 2; ++run) {
        ASSERT_TRUE(run_prefill_poisoned(plan, c, dev, workspace));
        const testing::Comparison cmp = testing::check_prefill(c);
        EXPECT_TRUE(cmp.passed) << k.shape.name << " on " << sms << " blocks, run " << run << ": " << cmp.summary();
        if (run == 0) first = c.out;
      }
      EXPECT_EQ(first, c.out) << k.shape.name << " on " << sms << " blocks: the second call differs";

      PlanOptions one_tile_per_block = o;
      one_tile_per_block.tuning.persistent_prefill = false;
      Plan plain;
      ASSERT_TRUE(plan_prefill(problem, few, one_tile_per_block, &plain).ok());
      EXPECT_EQ(plain.persistent_blocks(), 0);
      DeviceBuffer plain_workspace = gpu_test::poisoned_workspace(plain.workspace_bytes());
      ASSERT_TRUE(run_prefill_poisoned(plain, c, dev, plain_workspace));
      EXPECT_EQ(first, c.out) << k.shape.name << ": one block per tile differs from the persistent grid";
    }
  }
}

// A stream-K tail (Plan::stream_k): on 3-7 blocks most tail tiles are cut between two blocks, at
// D=64 (two and three consumer warpgroups) and D=128, fp16 and bf16, with ragged last query
// blocks and K/V tiles, more keys than queries and sharp scores (parts of very different weight);
// on the device's own SMs, a grid whose every tile is in the tail. Each matches the fp64
// reference and repeats its bits on a second call on the same (poisoned) workspace and in replays
// of a captured graph (the counters are zeroed per call, and the parts merge in key order
// whichever arrives first).
struct StreamKCase {
  PrefillShape shape;
  const char* family;
  int sms;  // 0: the device's own
  float q_scale;
};

std::vector<StreamKCase> stream_k_cases() {
  std::vector<StreamKCase> v;
  for (int sms : {3, 5, 7}) v.push_back({padded("d128_1000_of_2100", 1, 4, 4, 1000, 2100, false), "prefill_sm90", sms, 1.f});
  for (int sms : {5, 7}) {
    v.push_back({padded("d128_fp16_300_of_2500", 1, 4, 2, 300, 2500, false, 128, DType::kF16), "prefill_sm90", sms, 6.f});
  }
  for (int sms : {3, 7}) {
    v.push_back({padded("d64_fp16_1000_of_2100", 1, 4, 4, 1000, 2100, false, 64, DType::kF16), "prefill_sm90", sms, 1.f});
  }
  for (int sms : {3, 5}) {
    v.push_back({padded("d64_bf16_m192_700_of_2100", 2, 4, 2, 700, 2100, false, 64), "prefill_sm90_m192", sms, 6.f});
  }
  v.push_back({padded("d64_all_tail_136_tiles", 1, 136, 136, 128, 2048, false, 64, DType::kF16), "prefill_sm90", 0, 1.f});
  return v;
}

class StreamKTail : public ::testing::TestWithParam<StreamKCase> {};

TEST_P(StreamKTail, MergesCutTilesAndRepeatsItsBits) {
  const StreamKCase& k = GetParam();
  const PrefillProblem& problem = k.shape.spec.problem;
  SPLITKV_REQUIRE_GPU(problem.dtype, problem.head_dim);
  DeviceInfo device = gpu_test::device();
  if (device.cc_major < 9) GTEST_SKIP() << "prefill_sm90 needs sm_90";
  if (k.sms > 0) device.sm_count = k.sms;
  PlanOptions o;
  o.family = k.family;
  Plan plan;
  const Status planned = plan_prefill(problem, device, o, &plan);
  ASSERT_TRUE(planned.ok()) << planned.message();
  SPLITKV_REQUIRE_PLAN_COMPILED(plan);
  if (k.sms == 0 && !plan.stream_k()) GTEST_SKIP() << "no stream-K tail on this device's SM count: " << plan.note();
  ASSERT_TRUE(plan.stream_k()) << plan.note();
  testing::PrefillCaseSpec spec = k.shape.spec;
  spec.q_scale = k.q_scale;
  testing::PrefillCase c = testing::make_prefill_case(spec);
  testing::DevicePrefillCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  std::vector<uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(run_prefill_poisoned(plan, c, dev, workspace));
    if (run == 0) {
      const testing::Comparison cmp = testing::check_prefill(c);
      EXPECT_TRUE(cmp.passed) << cmp.summary();
      first = c.out;
    }
  }
  EXPECT_EQ(first, c.out) << "the second call differs";

  const gpu_test::CapturedCall graph(
      [&](cudaStream_t stream) { return run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), stream); });
  ASSERT_TRUE(graph.ok()) << graph.error();
  for (int replay = 0; replay < 2; ++replay) {
    testing::poison_outputs(c);
    dev.upload_outputs(c);
    ASSERT_EQ(graph.replay(), cudaSuccess);
    dev.download_outputs(c);
    EXPECT_EQ(first, c.out) << "graph replay " << replay << " differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, StreamKTail, ::testing::ValuesIn(stream_k_cases()),
                         [](const ::testing::TestParamInfo<StreamKCase>& info) {
                           return info.param.shape.name + "_on_" +
                                  (info.param.sms > 0 ? std::to_string(info.param.sms) : std::string("device")) +
                                  "_blocks";
                         });

TEST(PrefillGpu, ChunkedPrefillSplitsByItselfAndMatches) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // A 64-token chunk of 2 heads against 20k keys: the planner must choose split-KV.
  PrefillShape s = padded("chunk", 1, 2, 2, 64, 20000, true);
  testing::PrefillCase c = testing::make_prefill_case(s.spec);
  Plan plan;
  ASSERT_TRUE(plan_prefill(c.problem, gpu_test::device(), {}, &plan).ok());
  EXPECT_EQ(plan.strategy(), Strategy::kSplitKV);
  EXPECT_GT(plan.num_splits(), 1);
  testing::DevicePrefillCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_prefill(c);
  EXPECT_TRUE(cmp.passed) << cmp.summary();
}

TEST(PrefillGpu, BadDeviceCuSeqlensBecomeNaN) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  PrefillShape s = varlen("bad", 2, 2, {40, 30}, {50, 30}, false);
  testing::PrefillCase c = testing::make_prefill_case(s.spec);
  Plan plan;
  ASSERT_TRUE(plan_prefill(c.problem, gpu_test::device(), {}, &plan).ok());
  testing::DevicePrefillCase dev(c);
  dev.tensors.cu_seqlens_k_host = nullptr;  // the host cannot see what the device reads
  std::vector<int32_t> cu_k = {0, 50, 1 << 20};  // sequence 1 points far past the k tensor
  dev.cu_seqlens_k.upload(cu_k.data(), cu_k.size() * sizeof(int32_t));
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  dev.download_outputs(c);
  const std::vector<double> out = testing::dense_values(c.host_tensors().out);
  const size_t per_token = 2 * 128;
  EXPECT_FALSE(std::isnan(out[0])) << "sequence 0 is valid";
  for (size_t t = 40; t < 70; ++t) EXPECT_TRUE(std::isnan(out[t * per_token])) << "token " << t;
}

}  // namespace
}  // namespace splitkv
