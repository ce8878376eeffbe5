// splitkv::dist on N ranks, one process per GPU (scripts/run_dist_tests.sh starts them through
// scripts/run_ranks.sh; without the launcher the binary is one rank on GPU 0). Every rank builds
// the same random cache, holds a shard of each sequence's keys, and must get the whole context's
// result: against the fp64 reference, and bitwise equal to one GPU's batch-invariant decode when
// the shards are split-aligned.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dist_rank.hpp"
#include "splitkv/dist.hpp"
#include "testing/decode_check.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

// One communicator per process, made on first use (after the GPU check, so CI without a GPU never
// touches NCCL).
const dist_tools::RankEnv& the_rank() {
  static const dist_tools::RankEnv env = testing::gpu_available() ? dist_tools::join_ranks() : [] {
    dist_tools::RankEnv none;
    none.error = "no CUDA device";
    return none;
  }();
  return env;
}

#define SPLITKV_REQUIRE_RANK()                                              \
  do {                                                                      \
    if (!the_rank().error.empty()) GTEST_SKIP() << the_rank().error;        \
    if (!dtype_compiled(DType::kBF16)) GTEST_SKIP() << "bf16 not compiled"; \
  } while (0)

// This rank's shard of every sequence: keys [cut(b, rank), cut(b, rank + 1)), whole pages.
// Runs the sharded decode into dev's out and lse, with a plain workspace or a symmetric NCCL window.
void run_my_shard(testing::DecodeCase& c, testing::DeviceDecodeCase& dev,
                  const std::vector<std::vector<int>>& cuts, const PlanOptions& options, bool symmetric = false) {
  const dist_tools::RankEnv& me = the_rank();
  const int B = c.problem.batch;
  std::vector<int> lo, hi;
  int longest = 0;  // of any shard on any rank: every rank plans with it
  for (int b = 0; b < B; ++b) {
    for (int r = 0; r < me.world; ++r) {
      longest = std::max(longest, cuts[size_t(b)][size_t(r) + 1] - cuts[size_t(b)][size_t(r)]);
    }
    lo.push_back(cuts[size_t(b)][size_t(me.rank)]);
    hi.push_back(cuts[size_t(b)][size_t(me.rank) + 1]);
  }
  testing::DecodeShard mine = testing::paged_shard(c, lo, hi);
  DecodeProblem shard = c.problem;
  shard.max_kv_len = longest;
  DeviceInfo device;
  ASSERT_TRUE(query_device(me.rank, &device).ok());
  dist::ShardedDecodePlan plan;
  const Status planned = dist::plan_sharded_decode(shard, device, options, me.world, &plan);
  ASSERT_TRUE(planned.ok()) << planned.message();
  DeviceBuffer d_lens = DeviceBuffer::from(mine.lens), d_after = DeviceBuffer::from(mine.keys_after);
  DeviceBuffer d_table = DeviceBuffer::from(mine.block_table);
  DecodeTensors t = dev.tensors;
  t.seq_lens.data = d_lens.get();
  t.seq_lens_host = mine.lens.data();
  t.block_table.data = d_table.get();
  t.block_table_host = mine.block_table.data();
  t.keys_after = TensorRef::contiguous(d_after.get(), DType::kI32, {B});
  Status ran;
  if (symmetric) {  // the peer merge: partials read from every rank's window
    dist::SymmetricWorkspace window;
    const Status made = dist::alloc_symmetric_workspace(plan, me.comm, &window);
    ASSERT_TRUE(made.ok()) << made.message();
    ASSERT_EQ(cudaMemset(window.data, 0xff, window.bytes), cudaSuccess);
    ran = dist::run_sharded_decode(plan, t, window, me.comm, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE(dist::free_symmetric_workspace(me.comm, &window).ok());
  } else {  // NCCL all-gathers into a plain workspace
    DeviceBuffer workspace(plan.workspace_bytes);
    workspace.fill_bytes(0xff);
    ran = dist::run_sharded_decode(plan, t, workspace.get(), workspace.bytes(), me.comm, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ASSERT_TRUE(ran.ok()) << ran.message();
  dev.download_outputs(c);
}

// The argument checks need no GPU and no communicator.
TEST(ShardedDecodeArguments, AreCheckedBeforeAnyLaunch) {
  DecodeProblem p = testing::make_decode_case(testing::paged_gqa_spec(1, {100})).problem;
  dist::ShardedDecodePlan plan;
  Status s = dist::plan_sharded_decode(p, DeviceInfo::h200(), {}, 0, &plan);
  EXPECT_EQ(s.argument(), "world_size") << s.message();
  s = dist::plan_sharded_decode(p, DeviceInfo::h200(), {}, 2, nullptr);
  EXPECT_EQ(s.argument(), "plan") << s.message();
  ASSERT_TRUE(dist::plan_sharded_decode(p, DeviceInfo::h200(), {}, 2, &plan).ok());
  EXPECT_GT(plan.workspace_bytes, 0u);
  s = dist::run_sharded_decode(plan, DecodeTensors{}, nullptr, 0, nullptr, nullptr);
  EXPECT_EQ(s.argument(), "comm") << s.message();
  s = dist::run_sharded_decode(plan, DecodeTensors{}, dist::SymmetricWorkspace{}, nullptr, nullptr);
  EXPECT_EQ(s.argument(), "comm") << s.message();
  s = dist::alloc_symmetric_workspace(plan, nullptr, nullptr);
  EXPECT_EQ(s.argument(), "workspace") << s.message();
  dist::SymmetricWorkspace none;
  EXPECT_TRUE(dist::free_symmetric_workspace(nullptr, &none).ok());  // freeing an empty one is a no-op
  // A shard's partials come from the decode kernels: a shape the planner would serve by chunked
  // prefill keeps them here, and naming a prefill family is refused.
  DecodeProblem speculative = p;
  speculative.batch = 8;
  speculative.num_q_heads = 28;
  speculative.num_kv_heads = 4;
  speculative.q_len = 8;
  speculative.causal = true;
  speculative.max_kv_len = 8192;
  ASSERT_TRUE(dist::plan_sharded_decode(speculative, DeviceInfo::h200(), {}, 2, &plan).ok());
  EXPECT_FALSE(plan.local.decode_via_prefill());
  PlanOptions prefill_family;
  prefill_family.family = "prefill_sm90_gqa64";
  s = dist::plan_sharded_decode(speculative, DeviceInfo::h200(), prefill_family, 2, &plan);
  EXPECT_EQ(s.argument(), "options.family") << s.message();
}

TEST(ShardedDecode, EveryRankGetsTheWholeContext) {
  SPLITKV_REQUIRE_RANK();
  const int world = the_rank().world;
  for (bool symmetric : {false, true}) {
    for (int q_len : {1, 4, 16}) {
      testing::DecodeCase c = testing::make_decode_case(testing::paged_gqa_spec(q_len, {6000, 1800, 0, 33}));
      testing::poison_outputs(c);
      testing::DeviceDecodeCase dev(c);
      dev.upload_outputs(c);
      std::vector<std::vector<int>> cuts;  // unequal shards: rank r gets a (r + 1)-weighted share
      for (int len : c.seq_lens) {
        std::vector<int> at = {0};
        const int weights = world * (world + 1) / 2;
        int acc = 0;
        for (int r = 0; r < world; ++r) {
          acc += r + 1;
          at.push_back(r + 1 == world ? len : std::min(len, len * acc / weights / 16 * 16));
        }
        cuts.push_back(at);
      }
      run_my_shard(c, dev, cuts, PlanOptions{}, symmetric);
      const testing::Comparison cmp = testing::check_decode(c);
      EXPECT_TRUE(cmp.passed) << "rank " << the_rank().rank << " q_len " << q_len << (symmetric ? " peer merge" : "")
                              << ": " << cmp.summary();
    }
  }
}

TEST(ShardedDecode, SplitAlignedShardsGiveTheBitsOfOneGpu) {
  SPLITKV_REQUIRE_RANK();
  const int world = the_rank().world, split_tokens = 1024;
  for (bool symmetric : {false, true}) {
    for (int q_len : {1, 4}) {
      testing::DecodeCase c = testing::make_decode_case(testing::paged_gqa_spec(q_len, {9000, 2048, 5000, 1}));
      PlanOptions o;
      o.split_tokens = split_tokens;
      testing::DeviceDecodeCase dev(c);
      Plan single;
      DeviceInfo device;
      ASSERT_TRUE(query_device(the_rank().rank, &device).ok());
      ASSERT_TRUE(plan_decode(c.problem, device, o, &single).ok());
      DeviceBuffer ws(single.workspace_bytes());
      ASSERT_TRUE(run_decode(single, dev.tensors, ws.get(), ws.bytes(), nullptr).ok());
      dev.download_outputs(c);
      const std::vector<uint16_t> one_gpu = c.out;

      // Rank r holds global splits [r * S, (r + 1) * S) of every sequence.
      const int splits = (c.problem.max_kv_len + split_tokens - 1) / split_tokens;
      const int per_rank = (splits + world - 1) / world;
      std::vector<std::vector<int>> cuts;
      for (int len : c.seq_lens) {
        std::vector<int> at;
        for (int r = 0; r <= world; ++r) at.push_back(std::min(len, r * per_rank * split_tokens));
        at.back() = len;
        cuts.push_back(at);
      }
      testing::poison_outputs(c);
      dev.upload_outputs(c);
      run_my_shard(c, dev, cuts, o, symmetric);
      EXPECT_TRUE(testing::check_decode(c).passed);
      EXPECT_EQ(c.out, one_gpu) << "rank " << the_rank().rank << " q_len " << q_len << (symmetric ? " peer merge" : "");
    }
  }
}

// The two exchanges merge the same partials in the same order: the same bits.
TEST(ShardedDecode, PeerMergeGivesTheAllGathersBits) {
  SPLITKV_REQUIRE_RANK();
  const int world = the_rank().world;
  testing::DecodeCase c = testing::make_decode_case(testing::paged_gqa_spec(2, {5000, 700, 0}));
  testing::DeviceDecodeCase dev(c);
  std::vector<std::vector<int>> cuts;  // even page-aligned shards
  for (int len : c.seq_lens) {
    std::vector<int> at;
    for (int r = 0; r <= world; ++r) at.push_back(r == world ? len : len * r / world / 16 * 16);
    cuts.push_back(at);
  }
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  run_my_shard(c, dev, cuts, PlanOptions{});
  ASSERT_TRUE(testing::check_decode(c).passed);
  const std::vector<uint16_t> plain = c.out;
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  run_my_shard(c, dev, cuts, PlanOptions{}, /*symmetric=*/true);
  EXPECT_EQ(c.out, plain) << "rank " << the_rank().rank;
}

}  // namespace
}  // namespace splitkv
