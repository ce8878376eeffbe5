// Context-parallel decode on one GPU: a paged cache cut into shards per sequence, each shard
// decoded on its own into caller partials (keys_after keeps causal masking in global positions),
// the partials concatenated in shard order and merged by run_combine. Checked against the fp64
// reference over the whole context, and bitwise against single-GPU batch-invariant decode when
// the shard boundary falls on the same split boundary for every sequence.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/half_convert.hpp"
#include "gpu_test_util.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

// Decodes every shard of `c` (shard s of sequence b: keys [cuts[b][s], cuts[b][s + 1]), page
// multiples) into its own partials, then merges all partials in shard order into dev's out and lse.
// options apply to every shard's plan.
void decode_shards_and_merge(testing::DecodeCase& c, testing::DeviceDecodeCase& dev,
                             const std::vector<std::vector<int>>& cuts, const PlanOptions& options) {
  const DecodeProblem& whole = c.problem;
  const int B = whole.batch, shards = static_cast<int>(cuts[0].size()) - 1;
  const int64_t rows = int64_t(B) * whole.q_len, H = whole.num_q_heads, D = whole.head_dim;
  std::vector<DeviceBuffer> partial_o, partial_lse;
  std::vector<int> splits;
  for (int s = 0; s < shards; ++s) {
    std::vector<int> lo, hi;
    for (int b = 0; b < B; ++b) {
      lo.push_back(cuts[size_t(b)][size_t(s)]);
      hi.push_back(cuts[size_t(b)][size_t(s) + 1]);
    }
    testing::DecodeShard shard = testing::paged_shard(c, lo, hi);
    std::vector<int32_t>& lens = shard.lens;
    // Each shard is planned for its own longest sequence, as its GPU would: with split_tokens,
    // the shards' splits then line up with the whole context's.
    DecodeProblem problem = whole;
    problem.max_kv_len = *std::max_element(lens.begin(), lens.end());
    // Shards need the decode kernels (keys_after, caller partials): q_len 16 on 32/8 heads would
    // otherwise take the chunked-prefill route.
    PlanOptions shard_options = options;
    shard_options.tuning.prefill_route = false;
    Plan plan;
    ASSERT_TRUE(plan_decode(problem, gpu_test::device(), shard_options, &plan).ok());
    DeviceBuffer d_lens = DeviceBuffer::from(lens), d_after = DeviceBuffer::from(shard.keys_after);
    DeviceBuffer d_table = DeviceBuffer::from(shard.block_table);
    const int S = plan.num_splits();
    partial_o.emplace_back(size_t(S) * rows * H * D * sizeof(float));
    partial_lse.emplace_back(size_t(S) * rows * H * sizeof(float));
    partial_o.back().fill_bytes(0xff);  // NaN: a partial the kernel did not write fails the test
    partial_lse.back().fill_bytes(0xff);
    DecodeTensors t = dev.tensors;
    t.seq_lens.data = d_lens.get();
    t.seq_lens_host = lens.data();
    t.block_table.data = d_table.get();
    t.block_table_host = shard.block_table.data();
    t.keys_after = TensorRef::contiguous(d_after.get(), DType::kI32, {B});
    t.out = t.lse = TensorRef{};
    t.partial_o = TensorRef::contiguous(partial_o.back().get(), DType::kF32, {S, rows, H, D});
    t.partial_lse = TensorRef::contiguous(partial_lse.back().get(), DType::kF32, {S, rows, H});
    const Status st = run_decode(plan, t, nullptr, 0, nullptr);  // no workspace: partials go to the caller
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    splits.push_back(S);
  }
  // The exchange (an all-gather between GPUs) is a concatenation here.
  int total = 0;
  for (int n : splits) total += n;
  DeviceBuffer all_o(size_t(total) * rows * H * D * sizeof(float)), all_lse(size_t(total) * rows * H * sizeof(float));
  size_t o_at = 0, lse_at = 0;
  for (int s = 0; s < shards; ++s) {
    ASSERT_EQ(cudaMemcpy(static_cast<char*>(all_o.get()) + o_at, partial_o[size_t(s)].get(), partial_o[size_t(s)].bytes(),
                         cudaMemcpyDeviceToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(static_cast<char*>(all_lse.get()) + lse_at, partial_lse[size_t(s)].get(),
                         partial_lse[size_t(s)].bytes(), cudaMemcpyDeviceToDevice),
              cudaSuccess);
    o_at += partial_o[size_t(s)].bytes();
    lse_at += partial_lse[size_t(s)].bytes();
  }
  CombineProblem cp;
  cp.num_splits = total;
  cp.batch = B;
  cp.seq_len = whole.q_len;
  cp.num_heads = whole.num_q_heads;
  cp.head_dim = whole.head_dim;
  cp.dtype = whole.dtype;
  CombineTensors ct;
  ct.partial_o = TensorRef::contiguous(all_o.get(), DType::kF32, {total, rows, H, D});
  ct.partial_lse = TensorRef::contiguous(all_lse.get(), DType::kF32, {total, rows, H});
  ct.out = dev.tensors.out;
  ct.lse = dev.tensors.lse;
  const Status st = run_combine(cp, ct, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  dev.download_outputs(c);
}

TEST(ContextShardsGpu, ShardPartialsMergeToTheWholeContext) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  std::mt19937 rng(11);
  for (int q_len : {1, 4, 16}) {
    testing::DecodeCase c = testing::make_decode_case(testing::paged_gqa_spec(q_len, {3000, 1100, 0, 37}));
    testing::poison_outputs(c);
    testing::DeviceDecodeCase dev(c);
    dev.upload_outputs(c);
    // Three shards per sequence at random page multiples: unequal, some empty.
    std::vector<std::vector<int>> cuts;
    for (int len : c.seq_lens) {
      const int pages = (len + 15) / 16;
      std::vector<int> at = {0, len};
      for (int s = 0; s < 2; ++s) at.push_back(std::min(len, int(rng() % uint32_t(pages + 1)) * 16));
      std::sort(at.begin(), at.end());
      cuts.push_back(at);
    }
    decode_shards_and_merge(c, dev, cuts, PlanOptions{});
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << "q_len " << q_len << ": " << cmp.summary();
  }
}

TEST(ContextShardsGpu, SplitAlignedShardsGiveTheBitsOfBatchInvariantDecode) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  // Every sequence's first shard is its first 2048 keys (two splits of 1024): the shards'
  // partials, concatenated, are the single-GPU decode's splits in the same order.
  for (int q_len : {1, 4}) {
    testing::DecodeCase c = testing::make_decode_case(testing::paged_gqa_spec(q_len, {9000, 2048, 5000}));
    PlanOptions o;
    o.split_tokens = 1024;
    testing::DeviceDecodeCase dev(c);
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    ASSERT_TRUE(run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
    dev.download_outputs(c);
    ASSERT_TRUE(testing::check_decode(c).passed);
    const std::vector<uint16_t> single = c.out;

    std::vector<std::vector<int>> cuts;
    for (int len : c.seq_lens) cuts.push_back({0, 2048, len});
    testing::poison_outputs(c);
    dev.upload_outputs(c);
    decode_shards_and_merge(c, dev, cuts, o);
    EXPECT_TRUE(testing::check_decode(c).passed);
    EXPECT_EQ(c.out, single) << "q_len " << q_len;
  }
}

TEST(ContextShardsGpu, NegativeKeysAfterGivesNaNForThatSequenceOnly) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c = testing::make_decode_case(testing::paged_gqa_spec(4, {3000, 700}));
  testing::poison_outputs(c);
  testing::DeviceDecodeCase dev(c);
  dev.upload_outputs(c);
  DeviceBuffer after = DeviceBuffer::from(std::vector<int32_t>{5, -1});
  DecodeTensors t = dev.tensors;
  t.keys_after = TensorRef::contiguous(after.get(), DType::kI32, {2});
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), {}, &plan).ok());
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(run_decode(plan, t, workspace.get(), workspace.bytes(), nullptr).ok());
  dev.download_outputs(c);
  const size_t per_sequence = size_t(c.problem.q_len) * c.problem.num_q_heads * c.problem.head_dim;
  for (int b = 0; b < 2; ++b) {
    size_t nans = 0;
    for (size_t k = 0; k < per_sequence; ++k) {
      nans += std::isnan(detail::half_bits_to_float(c.out[b * per_sequence + k], c.problem.dtype));
    }
    EXPECT_EQ(nans, b == 1 ? per_sequence : 0) << "sequence " << b;
  }
}

}  // namespace
}  // namespace splitkv
