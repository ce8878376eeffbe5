// The planner: the split decision, the choice of kernel family and the plan's invariants.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>

#include "kernels/tile_table.hpp"
#include "plan/split_heuristic.hpp"
#include "plan/workspace_layout.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv {
namespace {

DecodeProblem decode(int batch, int hq, int hkv, int max_len, int d = 128, int q_len = 1) {
  DecodeProblem p;
  p.batch = batch;
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = d;
  p.q_len = q_len;
  p.max_kv_len = max_len;
  return p;
}

Plan plan_or_die(const DecodeProblem& p, const PlanOptions& o = {}, DeviceInfo dev = DeviceInfo::h200()) {
  Plan plan;
  const Status s = plan_decode(p, dev, o, &plan);
  EXPECT_TRUE(s.ok()) << s.message();
  return plan;
}

TEST(Planner, BatchTimesKvHeadsFillingTheSmsMeansNoSplit) {
  const Plan plan = plan_or_die(decode(128, 32, 8, 1024));  // 1024 work units >> 132 SMs
  EXPECT_EQ(plan.num_splits(), 1);
  EXPECT_EQ(plan.strategy(), Strategy::kSplitQ);
  EXPECT_EQ(plan.workspace_bytes(), 0u);  // no combine, no workspace traffic
}

TEST(Planner, SingleLongSequenceSplitsMany) {
  const Plan plan = plan_or_die(decode(1, 32, 8, 131072));
  EXPECT_GE(plan.num_splits(), 8);
  EXPECT_EQ(plan.strategy(), Strategy::kSplitKV);
  EXPECT_GE(int64_t(plan.num_splits()) * plan.work_units(), 100);  // most SMs busy
}

TEST(Planner, QuantizedCachesFillResidentBlocksEvenly) {
  const int sms = DeviceInfo::h200().sm_count;
  for (KvFormat f : {KvFormat::kInt8, KvFormat::kInt4, KvFormat::kFP8E4M3, KvFormat::kK8V4}) {
    for (int len : {1024, 4096, 8192, 16384, 32768, 65536, 131072}) {
      DecodeProblem q = decode(1, 32, 8, len);
      PlanOptions split_rule_only;  // short 16-bit rows would take 8 splits in a cluster instead
      split_rule_only.merge = Merge::kCombineKernel;
      const Plan bf16 = plan_or_die(q, split_rule_only);
      q.kv_format = f;
      const Plan quant = plan_or_die(q, split_rule_only);
      EXPECT_GE(quant.num_splits(), bf16.num_splits()) << to_string(f) << " " << len;
      if (quant.num_splits() > bf16.num_splits()) {  // only to fill one or two blocks per SM, evenly
        const int64_t blocks = quant.work_units() * quant.num_splits();
        EXPECT_LE(blocks, 2 * sms) << to_string(f) << " " << len;
        EXPECT_GE(len / quant.num_splits(), 512) << to_string(f) << " " << len;
        EXPECT_NE(quant.note().find("even fill"), std::string::npos) << quant.note();
      }
    }
  }
  // Run 66's sweeps (docs/TUNING.md): two blocks per SM (B=1, 8 work units: 33 splits) wherever the
  // splits keep 512 keys, else one (16); with 8-bit values two SMs stay free for the combine's
  // blocks (32 splits); no third block, INT4 included (B=8 32k: 64 work units x 4).
  auto splits = [](int batch, int len, KvFormat f) {
    DecodeProblem q = decode(batch, 32, 8, len);
    q.kv_format = f;
    return plan_or_die(q).num_splits();
  };
  EXPECT_EQ(splits(1, 8192, KvFormat::kInt8), 16);
  EXPECT_EQ(splits(1, 16384, KvFormat::kInt8), 32);
  EXPECT_EQ(splits(1, 16384, KvFormat::kInt4), 32);
  EXPECT_EQ(splits(1, 32768, KvFormat::kInt8), 32);
  EXPECT_EQ(splits(1, 32768, KvFormat::kInt4), 33);
  EXPECT_EQ(splits(2, 16384, KvFormat::kK8V4), 16);
  EXPECT_EQ(splits(2, 16384, KvFormat::kFP8E4M3), 16);
  EXPECT_EQ(splits(1, 131072, KvFormat::kInt8), 32);
  EXPECT_EQ(splits(1, 131072, KvFormat::kFP8E4M3), 32);
  EXPECT_EQ(splits(1, 131072, KvFormat::kK8V4), 33);
  EXPECT_EQ(splits(1, 131072, KvFormat::kInt4), 33);
  EXPECT_EQ(splits(8, 32768, KvFormat::kInt8), 4);
  EXPECT_EQ(splits(8, 32768, KvFormat::kInt4), 4);
  // Grids of at least one block per SM keep the slot rule: B=32 4k INT4 (256 work units) takes 2.
  EXPECT_EQ(splits(32, 4096, KvFormat::kInt4), 2);
}

// PlanTuning::even_placement: a one-wave grid with fewer blocks per SM than its shared memory
// allows asks for enough that an SM holds at most ceil(blocks / SMs) of them (with the runtime's
// 1 KB per block), and no more than the device lets one block have.
TEST(Planner, OneWaveGridsAskForSharedMemoryThatHoldsEachSmToItsShare) {
  const DeviceInfo dev = DeviceInfo::h200();
  auto blocks_fit = [&](int smem) { return dev.smem_per_sm_bytes / (smem + 1024); };
  auto blocks_of = [](const Plan& p) { return int64_t(p.grid()[0]) * p.grid()[1] * p.grid()[2]; };
  DecodeProblem int4 = decode(8, 32, 8, 32768);  // 64 work units x 4 splits: 256 blocks, 3 fit
  int4.kv_format = KvFormat::kInt4;
  const Plan two = plan_or_die(int4);
  ASSERT_EQ(blocks_of(two), 256);
  ASSERT_EQ(two.blocks_per_sm(), 3);
  EXPECT_GT(two.launch_smem_bytes(), two.smem_bytes());
  EXPECT_EQ(blocks_fit(two.launch_smem_bytes()), 2);
  EXPECT_NE(describe(two).find("even placement"), std::string::npos) << describe(two);
  const Plan one = plan_or_die(decode(1, 32, 8, 16384));  // 16-bit cache: 112 blocks, 2 fit
  ASSERT_LE(blocks_of(one), dev.sm_count);
  ASSERT_EQ(one.blocks_per_sm(), 2);
  EXPECT_EQ(blocks_fit(one.launch_smem_bytes()), 1);
  EXPECT_LE(one.launch_smem_bytes(), dev.smem_per_block_bytes);
  // Off: the kernel's own size.
  PlanOptions off;
  off.tuning.even_placement = false;
  EXPECT_EQ(plan_or_die(int4, off).launch_smem_bytes(), 0);
  // A grid past one wave of resident blocks (B=128 1k, one split: 1024 blocks), a grid whose share
  // is already what fits (FP8 B=1 64k: 256 blocks, 2 fit), and splits merged in clusters keep it.
  EXPECT_EQ(plan_or_die(decode(128, 32, 8, 1024)).launch_smem_bytes(), 0);
  DecodeProblem fp8 = decode(1, 32, 8, 65536);
  fp8.kv_format = KvFormat::kFP8E4M3;
  const Plan full = plan_or_die(fp8);
  EXPECT_EQ(full.launch_smem_bytes(), 0) << describe(full);
  EXPECT_EQ(plan_or_die(decode(1, 32, 8, 1024)).launch_smem_bytes(), 0);  // 8 splits in a cluster
  PlanOptions cluster;
  cluster.merge = Merge::kCluster;
  EXPECT_EQ(plan_or_die(int4, cluster).launch_smem_bytes(), 0);
}

TEST(Planner, SpeculativeQueriesFillResidentBlockSlotsWithLongSplits) {
  // B=8, 32/8, 8k, q_len 4: 64 work units. One block per SM gives 2 splits (128 blocks); the two
  // resident slots give 4 splits of 2048 keys (docs/TUNING.md).
  const Plan single = plan_or_die(decode(8, 32, 8, 8192));
  const Plan spec = plan_or_die(decode(8, 32, 8, 8192, 128, 4));
  EXPECT_EQ(single.num_splits(), 2);
  ASSERT_GT(spec.blocks_per_sm(), 1);
  EXPECT_EQ(spec.num_splits(), 4) << spec.note();
  EXPECT_NE(spec.note().find("resident blocks per SM"), std::string::npos) << spec.note();
  // Splits stay >= 2048 keys: a short cache gains no extra splits from the slots.
  EXPECT_EQ(plan_or_die(decode(8, 32, 8, 2048, 128, 4)).num_splits(), plan_or_die(decode(8, 32, 8, 2048)).num_splits());
}

TEST(Planner, ResidentBlockSlotsAreFilledByTheBestLongEnoughCount) {
  // The first count within 85% of the best fill leaves slots empty where a count a little larger
  // fills them (docs/TUNING.md; run 53: B=8 28/4 q_len 2 at 32k 132.5 µs at 7 splits, 224 of 264
  // slots; 125.5 at 8, 256 slots; B=1 32/8 131k 131.2 at 29, 127.0 at 32).
  auto spec = [](int batch, int hq, int hkv, int len) {
    DecodeProblem p = decode(batch, hq, hkv, len, 128, 2);
    p.causal = true;
    return plan_or_die(p);
  };
  const Plan p28 = spec(8, 28, 4, 32768);
  ASSERT_EQ(p28.blocks_per_sm(), 2);
  EXPECT_EQ(p28.num_splits(), 8) << p28.note();
  EXPECT_EQ(spec(1, 32, 8, 131072).num_splits(), 32);
  EXPECT_EQ(spec(2, 32, 8, 32768).num_splits(), 16);
  // Splits stay >= 2048 keys: at 8k the 32 work units keep 4 (1024-key splits measured slower).
  EXPECT_EQ(spec(8, 28, 4, 8192).num_splits(), 4);
  // One block per SM (q_len 1, 16-bit): the slot rule does not apply.
  EXPECT_EQ(plan_or_die(decode(1, 32, 8, 131072)).num_splits(), 15);
}

TEST(Planner, AGridOfOneWaveAndAPartOverTheSlotsSplitsItsTail) {
  // B=64 64/8 q_len 4 D=64 8k: 512 work units on 132 x 3 slots run 1.29 waves, the last a third
  // full; 3 splits fill 97% of 4 waves (docs/TUNING.md, "Split counts").
  auto spec = [](int batch, int hq, int d, int q_len, int len, KvFormat f = KvFormat::kNative) {
    DecodeProblem p = decode(batch, hq, 8, len, d, q_len);
    p.causal = q_len > 1;
    p.kv_format = f;
    return plan_or_die(p);
  };
  const Plan tail = spec(64, 64, 64, 4, 8192);
  ASSERT_EQ(tail.blocks_per_sm(), 3);
  EXPECT_EQ(tail.num_splits(), 3) << tail.note();
  EXPECT_EQ(plan::choose_tail_splits(512, 128, 396, 4), 3);
  // INT4 codes dequantized for 8 rows are bound by the memory too: q_len 1 splits its tail.
  EXPECT_EQ(spec(64, 32, 128, 1, 8192, KvFormat::kInt4).num_splits(), 3);
  // Not split: two waves or more (B=256), grids short of 80% of the slots (the wave rule's), a
  // cap of one split, counts that leave the slots under 95% full (4k: 2 splits of 2048 keys fill
  // 86%), blocks that dequantize for 16 rows (bound by their own instructions), 8-bit codes.
  EXPECT_EQ(spec(256, 64, 64, 4, 8192).num_splits(), 1);
  EXPECT_EQ(plan::choose_tail_splits(792, 128, 396, 4), 1);
  EXPECT_EQ(plan::choose_tail_splits(300, 128, 396, 4), 1);
  EXPECT_EQ(plan::choose_tail_splits(512, 128, 396, 1), 1);
  EXPECT_EQ(plan::choose_tail_splits(512, 64, 396, 2), 1);
  EXPECT_EQ(spec(64, 32, 64, 4, 4096).num_splits(), 1);
  EXPECT_EQ(spec(64, 32, 128, 4, 8192, KvFormat::kInt4).num_splits(), 1);
  EXPECT_EQ(spec(64, 32, 64, 1, 8192, KvFormat::kFP8E4M3).num_splits(), 1);
}

TEST(Planner, ShortBlocksTakeTheVariantsInstancesTwoWarpTwin) {
  // decode_mma_m32 at D=64: blocks of a short sliding window (<= 256 keys) run the uncapped
  // variants instance's twin with two warps (38912 B of shared memory: five blocks per SM, by
  // registers too) where the grid then runs in fewer rounds: B=64's 512 blocks in one, not two
  // (132 x 2 slots for the four-warp instance, whose registers hold two) (docs/TUNING.md, "Kernels").
  auto gpt_oss = [](int batch, float softcap = 0.f, DeviceInfo device = DeviceInfo::h200()) {
    DecodeProblem p = decode(batch, 64, 8, 8192, 64, 4);
    p.causal = true;
    p.window_left = 128;
    p.sinks = true;
    p.softcap = softcap;
    return plan_or_die(p, {}, device);
  };
  const tiles::TileSummary tile = tiles::decode_mma_m32_summary(64, KvFormat::kBF16);
  EXPECT_EQ(tile.short_twin.warps, 2);
  EXPECT_EQ(tile.short_twin.smem_bytes, 38912);
  EXPECT_EQ(tiles::decode_mma_summary(64, KvFormat::kBF16).short_twin.warps, 0);
  EXPECT_EQ(tiles::decode_mma_m32_summary(128, KvFormat::kBF16).short_twin.warps, 0);
  for (int batch : {128, 64}) {
    const Plan plan = gpt_oss(batch);
    ASSERT_EQ(plan.family(), "decode_mma_m32");
    EXPECT_EQ(plan.short_twin_warps(), 2) << "B=" << batch << ": " << plan.note();
    EXPECT_EQ(plan.warps(), 2);
    EXPECT_EQ(plan.smem_bytes(), 38912);
    EXPECT_EQ(plan.blocks_per_sm(), 5) << "B=" << batch;
    EXPECT_EQ(plan.register_bound_blocks(), 0);
  }
  // B=256's 2048 blocks: the twin's version without the cluster inbox (one split, no merge),
  // register-bound for six, runs them in three rounds, not four.
  EXPECT_EQ(tile.short_twin.bound_blocks, 6);
  EXPECT_EQ(tile.short_twin.bound_smem_bytes, 36864);
  const Plan bound = gpt_oss(256);
  EXPECT_EQ(bound.short_twin_warps(), 2) << bound.note();
  EXPECT_EQ(bound.num_splits(), 1);
  EXPECT_EQ(bound.smem_bytes(), 36864);
  EXPECT_EQ(bound.blocks_per_sm(), 6);
  EXPECT_EQ(bound.register_bound_blocks(), 6);
  // PlanTuning::decode_stream: those one-split plans whose blocks take more than one round run on a
  // persistent grid of one-warp blocks, ten per SM; one round (B=64: 512 blocks of 792 slots), plans
  // that keep the four-warp block (B=32), and the switch off do not take it.
  PlanOptions no_stream;
  no_stream.tuning.decode_stream = false;
  for (int batch : {256, 128, 64, 32}) {
    DecodeProblem p = decode(batch, 64, 8, 8192, 64, 4);
    p.causal = true;
    p.window_left = 128;
    p.sinks = true;
    const Plan streamed = plan_or_die(p);
    const Plan twin = plan_or_die(p, no_stream);
    EXPECT_EQ(twin.persistent_blocks(), 0) << twin.note();
    if (batch >= 128) {
      EXPECT_EQ(streamed.persistent_blocks(), 132 * 10) << streamed.note();
      EXPECT_EQ(streamed.launch_smem_bytes(), 0);
      EXPECT_NE(streamed.seal(), twin.seal());
    } else {
      EXPECT_EQ(streamed.persistent_blocks(), 0) << streamed.note();
      EXPECT_EQ(streamed.seal(), twin.seal());
    }
    // An FP8 cache's short twin (decode_quant) has no stream version: its plans keep their grid.
    p.kv_format = KvFormat::kFP8E4M3;
    const Plan fp8 = plan_or_die(p);
    if (batch == 256) EXPECT_EQ(fp8.short_twin_warps(), 2) << fp8.note();
    EXPECT_EQ(fp8.persistent_blocks(), 0) << fp8.note();
  }
  // The 16-row tile's stream kernel (twelve one-warp blocks per SM) serves the single-query rows
  // (q_len 1 x GQA 8: 8 rows, decode_mma_n8's by priority) of several rounds of short blocks, by
  // default and where decode_mma is named; without decode_stream, or named n8, they keep n8's
  // blocks, as do rows that fit one round (B=8) and the capped instance's.
  EXPECT_EQ(tiles::decode_stream_blocks_per_sm(tiles::decode_tile(64, 32)), 10);
  EXPECT_EQ(tiles::decode_stream_blocks_per_sm(tiles::decode_tile(64, 16)), 12);
  EXPECT_EQ(tiles::decode_stream_blocks_per_sm(tiles::decode_tile(128, 16)), 0);
  PlanOptions named;
  named.family = "decode_mma";
  for (int batch : {256, 64, 8}) {
    DecodeProblem p = decode(batch, 64, 8, 8192, 64, 1);
    p.window_left = 128;
    p.sinks = true;
    const Plan by_default = plan_or_die(p);
    const Plan streamed = plan_or_die(p, named);
    EXPECT_EQ(streamed.family(), "decode_mma");
    // B=8: 64 blocks fit one round of the four-warp block.
    EXPECT_EQ(streamed.persistent_blocks(), batch >= 64 ? 132 * 12 : 0) << streamed.note();
    EXPECT_EQ(by_default.family(), batch >= 64 ? "decode_mma" : "decode_mma_n8") << by_default.note();
    EXPECT_EQ(by_default.persistent_blocks(), streamed.persistent_blocks()) << by_default.note();
    const Plan n8 = plan_or_die(p, no_stream);
    EXPECT_EQ(n8.family(), "decode_mma_n8");
    EXPECT_EQ(n8.persistent_blocks(), 0);
    PlanOptions named_n8;
    named_n8.family = "decode_mma_n8";
    EXPECT_EQ(plan_or_die(p, named_n8).family(), "decode_mma_n8");
    p.softcap = 30.f;  // the capped instance has no stream kernel
    EXPECT_EQ(plan_or_die(p, named).persistent_blocks(), 0);
    EXPECT_EQ(plan_or_die(p).family(), "decode_mma_n8");
  }
  // B=32's 256 blocks fit one round of the four-warp instance: it keeps them (its registers' two).
  EXPECT_EQ(gpt_oss(32).family(), "decode_mma_m32");
  EXPECT_EQ(gpt_oss(32).short_twin_warps(), 0) << gpt_oss(32).note();
  EXPECT_EQ(gpt_oss(32).blocks_per_sm(), 2);
  // B=16 and below: the 16-row tile, in two m tiles per KV head, which has no twin.
  EXPECT_EQ(gpt_oss(16).family(), "decode_mma");
  EXPECT_EQ(gpt_oss(16).short_twin_warps(), 0);
  // FP8's 16-row block at D=64 (decode_quant): a two-warp twin holding eight blocks per SM.
  const tiles::TileSummary fp8_tile = tiles::decode_quant_summary(64, KvFormat::kFP8E4M3);
  EXPECT_EQ(fp8_tile.short_twin.warps, 2);
  EXPECT_EQ(fp8_tile.short_twin.register_blocks, 8);
  EXPECT_EQ(tiles::decode_quant_summary(64, KvFormat::kInt8).short_twin.warps, 0);
  EXPECT_EQ(tiles::decode_quant_summary(128, KvFormat::kFP8E4M3).short_twin.warps, 0);
  EXPECT_EQ(tiles::decode_quant_n8_summary(64, KvFormat::kFP8E4M3).short_twin.warps, 0);
  auto gpt_oss_fp8 = [](int batch) {
    DecodeProblem p = decode(batch, 64, 8, 8192, 64, 4);
    p.causal = true;
    p.window_left = 128;
    p.sinks = true;
    p.kv_format = KvFormat::kFP8E4M3;
    return plan_or_die(p);
  };
  for (int batch : {256, 64}) {
    const Plan plan = gpt_oss_fp8(batch);
    ASSERT_EQ(plan.family(), "decode_quant");
    EXPECT_EQ(plan.short_twin_warps(), 2) << "B=" << batch << ": " << plan.note();
    EXPECT_EQ(plan.warps(), 2);
    EXPECT_EQ(plan.smem_bytes(), fp8_tile.short_twin.smem_bytes);
    EXPECT_EQ(plan.stages(), 4);
    EXPECT_EQ(plan.blocks_per_sm(), 8);
  }
  EXPECT_EQ(gpt_oss_fp8(16).short_twin_warps(), 0) << gpt_oss_fp8(16).note();
  // The 8-row block over a 16-bit cache at D=64 (decode_mma_n8: single-query rows of GQA 8): a
  // two-warp twin holding six blocks per SM (34816 B against 67584).
  const tiles::TileSummary n8_tile = tiles::decode_quant_n8_summary(64, KvFormat::kNative);
  EXPECT_EQ(n8_tile.short_twin.warps, 2);
  EXPECT_EQ(n8_tile.short_twin.smem_bytes, 34816);
  EXPECT_EQ(n8_tile.short_twin.register_blocks, 6);
  EXPECT_EQ(tiles::decode_quant_n8_summary(128, KvFormat::kNative).short_twin.warps, 0);
  auto gpt_oss_q1 = [](int batch) {  // without the stream kernel, which takes B=64-256 by default
    DecodeProblem p = decode(batch, 64, 8, 8192, 64, 1);
    p.window_left = 128;
    p.sinks = true;
    PlanOptions blocks;
    blocks.tuning.decode_stream = false;
    return plan_or_die(p, blocks);
  };
  // It holds as many warps per SM as the four-warp block (12), so it takes only grids it runs in
  // one round where the four-warp block needs more: B=64's 512 blocks (792 slots, not 396).
  const Plan q1_64 = gpt_oss_q1(64);
  ASSERT_EQ(q1_64.family(), "decode_mma_n8");
  EXPECT_EQ(q1_64.short_twin_warps(), 2) << q1_64.note();
  EXPECT_EQ(q1_64.warps(), 2);
  EXPECT_EQ(q1_64.smem_bytes(), 34816);
  EXPECT_EQ(q1_64.blocks_per_sm(), 6);
  // B=128 and B=256 (several rounds either way) and B=16 (one round either way) keep four warps.
  for (int batch : {256, 128, 16}) {
    EXPECT_EQ(gpt_oss_q1(batch).short_twin_warps(), 0) << "B=" << batch << ": " << gpt_oss_q1(batch).note();
    EXPECT_EQ(gpt_oss_q1(batch).warps(), 4);
  }
  // A device whose shared memory holds fewer: four twins, 8 warps per SM as the four-warp block's
  // two (by registers), over several rounds: the four-warp block keeps B=256; B=64's 512 blocks run
  // in one round of the twins (528 slots), not in two.
  DeviceInfo small = DeviceInfo::h200();
  small.smem_per_sm_bytes = 164 * 1024;
  small.smem_per_block_bytes = 163 * 1024;
  EXPECT_EQ(gpt_oss(256, 0.f, small).short_twin_warps(), 0);
  EXPECT_EQ(gpt_oss(256, 0.f, small).blocks_per_sm(), 2);
  EXPECT_EQ(gpt_oss(64, 0.f, small).short_twin_warps(), 2);
  EXPECT_EQ(gpt_oss(64, 0.f, small).blocks_per_sm(), 4);
  // The softcap's version has no twin: it holds its shared memory's three.
  EXPECT_EQ(gpt_oss(256, 30.f).short_twin_warps(), 0);
  EXPECT_EQ(gpt_oss(256, 30.f).register_bound_blocks(), 0);
  EXPECT_EQ(gpt_oss(256, 30.f).blocks_per_sm(), 3);
  // Plain problems keep the four-warp instance, whose registers allow shared memory's three.
  DecodeProblem plain = decode(256, 64, 8, 8192, 64, 4);
  plain.causal = true;
  EXPECT_EQ(plan_or_die(plain).short_twin_warps(), 0);
  EXPECT_EQ(plan_or_die(plain).register_bound_blocks(), 0);
  EXPECT_EQ(plan_or_die(plain).blocks_per_sm(), 3);
  EXPECT_NE(describe(gpt_oss(64)), describe(plan_or_die(plain)));
  EXPECT_NE(gpt_oss(64).seal(), gpt_oss(64, 30.f).seal());
}

TEST(Planner, LongBlocksTakeTheRegisterBoundTwinWhereItRunsTheGridInOneRound) {
  // decode_mma_m32 at D=64, long blocks (window 4096: 3 splits of ~1400 keys, or one of 4096 with
  // sinks) are bound by the memory: shared memory holds three four-warp blocks per SM, the
  // uncapped variants instance's registers two; its register-bound twin (three) only where it
  // runs the grid in one round (B=16: 384 blocks, 1 round, not 2).
  auto long_window = [](int batch, bool sinks, DeviceInfo device = DeviceInfo::h200()) {
    DecodeProblem p = decode(batch, 64, 8, 8192, 64, 4);
    p.causal = true;
    p.window_left = 4096;
    p.sinks = sinks;
    return plan_or_die(p, {}, device);
  };
  EXPECT_EQ(long_window(16, false).register_bound_blocks(), 3) << long_window(16, false).note();
  EXPECT_EQ(long_window(16, false).blocks_per_sm(), 3);
  EXPECT_EQ(long_window(64, false).register_bound_blocks(), 0) << long_window(64, false).note();
  EXPECT_EQ(long_window(64, false).blocks_per_sm(), 2);
  EXPECT_EQ(long_window(256, true).register_bound_blocks(), 0) << long_window(256, true).note();
  for (int batch : {16, 64, 256}) EXPECT_EQ(long_window(batch, true).short_twin_warps(), 0) << "B=" << batch;
  EXPECT_EQ(tiles::decode_mma_summary(64, KvFormat::kBF16).register_blocks.variants, 0);
  // On a device whose shared memory holds two four-warp blocks there is nothing to gain.
  DeviceInfo small = DeviceInfo::h200();
  small.smem_per_sm_bytes = 164 * 1024;
  small.smem_per_block_bytes = 163 * 1024;
  EXPECT_EQ(long_window(16, false, small).register_bound_blocks(), 0);
  EXPECT_EQ(long_window(16, false, small).blocks_per_sm(), 2);
}

TEST(Planner, ResidentBlocksAreWhatTheRegistersHold) {
  // The INT4 tile's instances whose registers hold fewer blocks than its shared memory allows
  // (scripts/check_residency.py checks these against the compiled kernels): the plan counts the
  // registers' blocks, after the splits, which it decides as before.
  auto spec = [](int d, int q_len, float softcap, int window) {
    DecodeProblem p = decode(1, 64, 8, 4096, d, q_len);
    p.causal = q_len > 1;
    p.kv_format = KvFormat::kInt4;
    p.softcap = softcap;
    p.window_left = window;
    return plan_or_die(p);
  };
  // D=64: shared memory holds four; the 16-row block's registers three, the 8-row block's variants three.
  EXPECT_EQ(spec(64, 2, 0.f, -1).family(), "decode_quant");
  EXPECT_EQ(spec(64, 2, 0.f, -1).blocks_per_sm(), 3) << spec(64, 2, 0.f, -1).note();
  EXPECT_EQ(spec(64, 2, 30.f, -1).blocks_per_sm(), 3);
  EXPECT_EQ(spec(64, 1, 0.f, -1).blocks_per_sm(), 4);
  EXPECT_EQ(spec(64, 1, 0.f, 128).blocks_per_sm(), 3);
  // D=128: shared memory holds three; the 16-row variants instances' registers two.
  EXPECT_EQ(spec(128, 2, 0.f, -1).blocks_per_sm(), 3);
  EXPECT_EQ(spec(128, 2, 0.f, 128).blocks_per_sm(), 2);
  EXPECT_EQ(spec(128, 2, 30.f, -1).blocks_per_sm(), 2);
  EXPECT_EQ(spec(128, 1, 30.f, -1).blocks_per_sm(), 3);
  EXPECT_NE(spec(128, 2, 30.f, -1).note().find("registers hold 2 blocks per SM"), std::string::npos);
  EXPECT_EQ(spec(128, 2, 30.f, -1).register_bound_blocks(), 0);  // no twin there
  // The keys-per-channel kernel at D=128: INT4_kc's plain instance holds three blocks with bf16 Q,
  // two with fp16 Q (its operand in two halves).
  DecodeProblem kc = decode(1, 32, 8, 4096, 128, 1);
  kc.kv_format = KvFormat::kInt4Kc;
  PlanOptions named;
  named.family = "decode_kc_n8";
  EXPECT_EQ(plan_or_die(kc, named).blocks_per_sm(), 3);
  kc.dtype = DType::kF16;
  EXPECT_EQ(plan_or_die(kc, named).blocks_per_sm(), 2);
}

TEST(Planner, GqaIsCountedByKvHeads) {
  // The query heads of a group share one block: 32/8 and 8/8 give the same grid and splits.
  const Plan gqa = plan_or_die(decode(2, 32, 8, 16384));
  const Plan mha = plan_or_die(decode(2, 8, 8, 16384));
  EXPECT_EQ(gqa.work_units(), 16);
  EXPECT_EQ(gqa.num_splits(), mha.num_splits());
  EXPECT_EQ(gqa.grid()[1], mha.grid()[1]);
  // 32 query heads each with their own KV head are 4x the work units.
  EXPECT_EQ(plan_or_die(decode(2, 32, 32, 16384)).work_units(), 64);
}

TEST(Planner, SplitsNeverExceedKvBlocksAndWorkspaceFits) {
  const int block_keys = tiles::decode_tile(128).block_keys();
  for (int batch : {1, 3, 16}) {
    for (int len : {1, 63, 64, 65, 1000, 4097, 100000}) {
      for (int forced : {0, 1, 5, 1000}) {
        PlanOptions o;
        o.num_splits = forced;
        const Plan plan = plan_or_die(decode(batch, 16, 4, len), o);
        const int kv_blocks = std::max(1, (len + block_keys - 1) / block_keys);
        EXPECT_LE(plan.num_splits(), kv_blocks) << batch << " " << len << " " << forced;
        EXPECT_GE(plan.num_splits(), 1);
        if (plan.num_splits() > 1 && !plan.cluster_combine()) {
          const size_t rows = size_t(batch) * 16;
          EXPECT_GE(plan.workspace_bytes(), plan.num_splits() * rows * (128 + 1) * sizeof(float));
        }
      }
    }
  }
}

TEST(Planner, ForcedSplitsAreClampedAndSaySo) {
  PlanOptions o;
  o.num_splits = 1000;
  const Plan plan = plan_or_die(decode(1, 8, 8, 640), o);
  EXPECT_EQ(plan.num_splits(), 10);
  EXPECT_NE(plan.note().find("clamped"), std::string::npos);
}

TEST(Planner, BatchInvariantModeFixesTheSplitSize) {
  PlanOptions o;
  o.split_tokens = 512;
  const Plan plan = plan_or_die(decode(3, 8, 2, 5000), o);
  EXPECT_EQ(plan.split_tokens(), 512);
  EXPECT_EQ(plan.num_splits(), 10);  // ceil(5000 / 512)
  o.split_tokens = 500;            // not a multiple of the KV block
  Plan bad;
  const Status s = plan_decode(decode(3, 8, 2, 5000), DeviceInfo::h200(), o, &bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.argument(), "options.split_tokens");
}

TEST(Planner, MaxSplitsCapsAutoAndRejectsContradictions) {
  PlanOptions o;
  o.max_splits = 4;
  EXPECT_LE(plan_or_die(decode(1, 32, 8, 131072), o).num_splits(), 4);
  o.num_splits = 8;
  Plan plan;
  EXPECT_EQ(plan_decode(decode(1, 32, 8, 131072), DeviceInfo::h200(), o, &plan).argument(), "options.num_splits");
  PlanOptions inv;
  inv.split_tokens = 1024;
  inv.max_splits = 4;  // 131072 / 1024 = 128 splits needed
  EXPECT_EQ(plan_decode(decode(1, 32, 8, 131072), DeviceInfo::h200(), inv, &plan).argument(), "options.max_splits");
}

TEST(Planner, FewerSmsMeanFewerSplits) {
  DeviceInfo small = DeviceInfo::h200();
  small.sm_count = 16;
  EXPECT_LT(plan_or_die(decode(1, 32, 8, 131072), {}, small).num_splits(),
            plan_or_die(decode(1, 32, 8, 131072)).num_splits());
}

TEST(Planner, SpeculativeDecodingTilesTheQueryRows) {
  // 16 queries x 4 heads per group = 64 packed rows = 2 tiles of 32 (decode_mma_m32), or 4 of 16.
  const Plan plan = plan_or_die(decode(8, 32, 8, 4096, 128, 16));
  EXPECT_EQ(plan.family(), "decode_mma_m32");
  EXPECT_EQ(plan.work_units(), 8 * 8 * 2);
  EXPECT_EQ(plan.grid()[1], 8 * 2);
  PlanOptions sixteen;
  sixteen.family = "decode_mma";
  const Plan mma = plan_or_die(decode(8, 32, 8, 4096, 128, 16), sixteen);
  EXPECT_EQ(mma.work_units(), 8 * 8 * 4);
  EXPECT_EQ(mma.grid()[1], 8 * 4);
  // One sequence: 16 work units of 32 rows leave SMs without a block at the splits its keys allow,
  // 32 units of 16 rows make a larger grid, so the planner takes the 16-row tiles.
  const Plan one = plan_or_die(decode(1, 32, 8, 4096, 128, 16));
  EXPECT_EQ(one.family(), "decode_mma") << one.note();
  EXPECT_EQ(one.work_units(), 8 * 4);
}

TEST(Planner, DecodeRejectsPrefillStrategies) {
  PlanOptions o;
  o.strategy = Strategy::kTwoPass;
  Plan plan;
  EXPECT_EQ(plan_decode(decode(1, 8, 8, 100), DeviceInfo::h200(), o, &plan).code(), StatusCode::kUnsupported);
}

PrefillProblem prefill(int batch, int heads, int len, bool causal = false) {
  PrefillProblem p;
  p.batch = batch;
  p.num_q_heads = p.num_kv_heads = heads;
  p.head_dim = 128;
  p.max_q_len = p.max_kv_len = len;
  p.causal = causal;
  return p;
}

TEST(Planner, PrefillSplitsOnlyWhenTheGridIsSmall) {
  Plan plan;
  ASSERT_TRUE(plan_prefill(prefill(4, 16, 4096), DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_EQ(plan.num_splits(), 1);
  // Chunked prefill: a 128-token chunk of one head against 32k keys.
  PrefillProblem chunk = prefill(1, 2, 128);
  chunk.max_kv_len = 32768;
  chunk.causal = true;
  ASSERT_TRUE(plan_prefill(chunk, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_GT(plan.num_splits(), 1);
  EXPECT_EQ(plan.strategy(), Strategy::kSplitKV);
  EXPECT_GT(plan.workspace_bytes(), 0u);
}

// Whether this build compiled `family` for (dtype, head_dim): the planner prefers compiled families.
bool compiled(const char* family, DType dtype, int head_dim) {
  for (const KernelFamilyInfo& f : kernel_families()) {
    if (f.name != family) continue;
    for (const KernelFamilyInfo::Compiled& c : f.compiled) {
      if (c.dtype == dtype && c.head_dim == head_dim) return true;
    }
  }
  return false;
}

// The planner's own tile choices never override a family named in the options.
void expect_named_family_kept(const PrefillProblem& problem) {
  PlanOptions named;
  named.family = "prefill_sm90";
  Plan plan;
  ASSERT_TRUE(plan_prefill(problem, DeviceInfo::h200(), named, &plan).ok());
  EXPECT_EQ(plan.family(), "prefill_sm90");
}

TEST(Planner, HeadDim64PrefillTakesThe192RowTileFromTwoAndAHalfWavesOn) {
  PrefillProblem long_rows = prefill(4, 12, 1536);  // 4 x 12 x 8 blocks of 192 rows: 2.9 waves
  long_rows.head_dim = 64;
  long_rows.dtype = DType::kF16;
  PrefillProblem short_rows = long_rows;  // 1k: 4 x 12 x 6 = 288 blocks, 2.2 waves
  short_rows.max_q_len = short_rows.max_kv_len = 1024;
  Plan plan;
  ASSERT_TRUE(plan_prefill(long_rows, DeviceInfo::h200(), {}, &plan).ok());
  if (compiled("prefill_sm90_m192", DType::kF16, 64)) {
    EXPECT_EQ(plan.family(), "prefill_sm90_m192");
    EXPECT_EQ(plan.block_m(), 192);
    EXPECT_EQ(plan.grid()[0], 8);
    EXPECT_NE(plan.note().find("384 blocks of 192 query rows"), std::string::npos) << plan.note();
  } else {
    EXPECT_NE(plan.family(), "prefill_sm90_m192");  // never chosen where this build lacks it
  }
  ASSERT_TRUE(plan_prefill(short_rows, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_NE(plan.family(), "prefill_sm90_m192");
  expect_named_family_kept(long_rows);
}

TEST(Planner, HeadDim256PrefillTakesThe80KeyTile) {
  for (const bool causal : {false, true}) {
    PrefillProblem problem = prefill(4, 16, 4096);
    problem.head_dim = 256;
    problem.causal = causal;
    Plan plan;
    ASSERT_TRUE(plan_prefill(problem, DeviceInfo::h200(), {}, &plan).ok());
    if (compiled("prefill_sm90_n80", problem.dtype, 256)) {
      EXPECT_EQ(plan.family(), "prefill_sm90_n80");
      EXPECT_EQ(plan.block_n(), 80);
      EXPECT_NE(plan.note().find("prefill_sm90_n80: measured faster"), std::string::npos) << plan.note();
    } else {
      EXPECT_NE(plan.family(), "prefill_sm90_n80");
    }
    expect_named_family_kept(problem);
  }
}

// GQA packing (prefill_sm90_gqa): where a sequence's queries fill few rows of a tile, a tile holds
// the query heads of one KV head instead (fewer tiles); longer query runs keep a head per tile.
TEST(Planner, ShortGqaChunksPackAKvHeadsQueryHeadsIntoOneTile) {
  PrefillProblem chunk = prefill(8, 32, 32, true);  // 32-query chunks of 32/8 heads on 8k keys
  chunk.num_kv_heads = 8;
  chunk.max_kv_len = 8192 + 32;
  Plan plan;
  ASSERT_TRUE(plan_prefill(chunk, DeviceInfo::h200(), {}, &plan).ok());
  if (compiled("prefill_sm90_gqa", DType::kBF16, 128)) {
    EXPECT_EQ(plan.family(), "prefill_sm90_gqa");
    EXPECT_EQ(plan.packed_queries(), 32);  // 128 rows / 4 heads
    EXPECT_EQ(plan.grid()[1], 8);          // KV heads
    EXPECT_EQ(plan.work_units(), 8 * 8);   // against 8 x 32 tiles of one head
    EXPECT_NE(plan.note().find("4 query heads x 32 queries per tile, 64 tiles instead of 256"), std::string::npos)
        << plan.note();
    EXPECT_NE(describe(plan).find("GQA packing"), std::string::npos) << describe(plan);
  } else {
    EXPECT_NE(plan.family(), "prefill_sm90_gqa");
  }
  // 256 queries: 8 x 8 tiles of 4 x 32 rows make no fewer tiles than 32 x 2 of one head.
  PrefillProblem longer = chunk;
  longer.max_q_len = 256;
  ASSERT_TRUE(plan_prefill(longer, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_NE(plan.family(), "prefill_sm90_gqa");
  EXPECT_EQ(plan.packed_queries(), 0);
  // No group, no packing; named, it packs whatever the shape, up to 16 heads per KV head.
  ASSERT_TRUE(plan_prefill(prefill(8, 32, 32, true), DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_EQ(plan.packed_queries(), 0);
  if (compiled("prefill_sm90_gqa", DType::kBF16, 128)) {
    PlanOptions named;
    named.family = "prefill_sm90_gqa";
    PrefillProblem seven = prefill(1, 28, 1000);  // 28/4: 7 heads of 16 queries (112 of 128 rows)
    seven.num_kv_heads = 4;
    ASSERT_TRUE(plan_prefill(seven, DeviceInfo::h200(), named, &plan).ok());
    EXPECT_EQ(plan.packed_queries(), 16);
    EXPECT_EQ(plan.grid()[0], 63);  // ceil(1000 / 16)
    EXPECT_EQ(plan.grid()[1], 4);
    PrefillProblem wide = prefill(1, 32, 100);  // 32/1: more heads than 8-row atoms in a tile
    wide.num_kv_heads = 1;
    const Status s = plan_prefill(wide, DeviceInfo::h200(), named, &plan);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_EQ(s.argument(), "options.family");
    EXPECT_NE(s.message().find("at most 16 query heads per KV head"), std::string::npos) << s.message();
  }
}

TEST(Planner, PrefillStrategiesArePlanned) {
  for (Strategy s : {Strategy::kSplitV, Strategy::kTwoPass}) {
    PlanOptions o;
    o.strategy = s;
    Plan plan;
    ASSERT_TRUE(plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), o, &plan).ok());
    EXPECT_EQ(plan.strategy(), s);
    EXPECT_EQ(plan.num_splits(), 1);
  }
  // Independent K/V tiles are a family chosen by name; it serves split-q/split-kv, not split-V.
  PlanOptions k16v64;
  k16v64.family = "prefill_mma_k16v64";
  Plan plan;
  ASSERT_TRUE(plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), k16v64, &plan).ok());
  EXPECT_EQ(plan.family(), "prefill_mma_k16v64");
  EXPECT_EQ(plan.block_n(), 64);
  k16v64.strategy = Strategy::kSplitV;
  const Status s = plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), k16v64, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.argument(), "options.strategy");
}

TEST(Planner, HopperIndependentKvTilesAreAFamilyByName) {
  // prefill_sm90_v64: 128-key K tiles (the split granularity), 64-key V tiles, ten 16 KB ring stages
  // next to two Q buffers (persistent), at head dim 128 only; never chosen by itself.
  PlanOptions o;
  o.family = "prefill_sm90_v64";
  Plan plan;
  ASSERT_TRUE(plan_prefill(prefill(4, 8, 1000), DeviceInfo::h200(), o, &plan).ok());
  EXPECT_EQ(plan.family(), "prefill_sm90_v64");
  EXPECT_EQ(plan.block_n(), 128);
  EXPECT_GT(plan.persistent_blocks(), 0);  // 256 tiles
  constexpr tiles::PrefillSm90Tile t = tiles::prefill_sm90_tile(128, tiles::PrefillSm90Variant::kV64);
  static_assert(t.v_keys() == 64 && t.v_tiles_per_step() == 2 && t.stage_elems() * 2 == 16 * 1024);
  static_assert(t.smem_bytes() == tiles::prefill_sm90_tile(128).smem_bytes(), "the default's ring memory");
  Plan auto_plan;
  ASSERT_TRUE(plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), PlanOptions{}, &auto_plan).ok());
  EXPECT_NE(auto_plan.family(), "prefill_sm90_v64");
  PrefillProblem d64 = prefill(2, 8, 1000);
  d64.head_dim = 64;
  const Status s = plan_prefill(d64, DeviceInfo::h200(), o, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.argument(), "head_dim") << s.message();
  EXPECT_NE(s.message().find("prefill_sm90_v64"), std::string::npos) << s.message();
}

TEST(Planner, SixtyFourRowPackedTilesAreAFamilyByName) {
  // prefill_sm90_gqa64: a KV head's query heads in 64 rows (28/4: 7 heads x 8 queries), 64-key
  // tiles, one consumer warpgroup, small enough for two blocks per SM; D=128, groups of <= 8.
  PlanOptions o;
  o.family = "prefill_sm90_gqa64";
  PrefillProblem spec = prefill(8, 28, 8, true);  // 8 speculative queries after 8k keys
  spec.num_kv_heads = 4;
  spec.max_kv_len = 8192 + 8;
  spec.kv_cache = true;
  spec.page_size = 16;
  Plan plan;
  ASSERT_TRUE(plan_prefill(spec, DeviceInfo::h200(), o, &plan).ok());
  EXPECT_EQ(plan.family(), "prefill_sm90_gqa64");
  EXPECT_EQ(plan.block_m(), 64);
  EXPECT_EQ(plan.block_n(), 64);
  EXPECT_EQ(plan.warps(), 8);
  EXPECT_EQ(plan.packed_queries(), 8);
  EXPECT_EQ(plan.blocks_per_sm(), 2);
  EXPECT_EQ(plan.grid()[0], 1);
  EXPECT_EQ(plan.grid()[1], 4);
  EXPECT_EQ(plan.persistent_blocks(), 0);
  constexpr tiles::PrefillSm90Tile t = tiles::prefill_sm90_tile(128, tiles::PrefillSm90Variant::kGqa64);
  static_assert(t.blocks_per_sm() == 2 && 2 * (t.smem_bytes() + 1024) <= 228 * 1024, "two blocks per SM");
  Plan auto_plan;
  ASSERT_TRUE(plan_prefill(spec, DeviceInfo::h200(), PlanOptions{}, &auto_plan).ok());
  EXPECT_NE(auto_plan.family(), "prefill_sm90_gqa64");
  PrefillProblem wide = spec;  // 32/2: 16 heads per KV head, more than 64 rows' 8-row atoms
  wide.num_q_heads = 32;
  wide.num_kv_heads = 2;
  Status s = plan_prefill(wide, DeviceInfo::h200(), o, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.argument(), "options.family");
  EXPECT_NE(s.message().find("prefill_sm90_gqa64 packs at most 8 query heads per KV head"), std::string::npos)
      << s.message();
  PrefillProblem d64 = spec;
  d64.head_dim = 64;
  s = plan_prefill(d64, DeviceInfo::h200(), o, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.argument(), "head_dim") << s.message();
}

TEST(Planner, NamingAPrefillFamilyServesDecodeByChunkedPrefill) {
  // 28/4 q_len 8 on 8k keys, named prefill_sm90_gqa64: the chunked-prefill plan of the same cache
  // (one 64-row tile per KV head), still a decode plan; decode-only merges are refused by name.
  DecodeProblem spec = decode(8, 28, 4, 8192, 128, 8);
  spec.causal = true;
  PlanOptions o;
  o.family = "prefill_sm90_gqa64";
  Plan plan;
  ASSERT_TRUE(plan_decode(spec, DeviceInfo::h200(), o, &plan).ok());
  EXPECT_EQ(plan.kind(), Plan::Kind::kDecode);
  EXPECT_TRUE(plan.decode_via_prefill());
  EXPECT_EQ(plan.family(), "prefill_sm90_gqa64");
  EXPECT_EQ(plan.packed_queries(), 8);
  EXPECT_TRUE(plan.prefill().kv_cache);
  EXPECT_EQ(plan.prefill().max_q_len, 8);
  EXPECT_EQ(plan.prefill().max_kv_len, 8192);
  EXPECT_NE(describe(plan).find("served as: chunked prefill over the cache"), std::string::npos) << describe(plan);
  EXPECT_EQ(describe(plan).find("combine:"), std::string::npos) << describe(plan);
  PlanOptions decode_kernels;
  decode_kernels.tuning.prefill_route = false;
  Plan plain;
  ASSERT_TRUE(plan_decode(spec, DeviceInfo::h200(), decode_kernels, &plain).ok());
  EXPECT_FALSE(plain.decode_via_prefill());
  for (int option = 0; option < 4; ++option) {
    PlanOptions bad = o;
    if (option < 3) bad.merge = option == 0 ? Merge::kCluster : option == 1 ? Merge::kFused : Merge::kAtomic;
    if (option == 3) bad.split_tokens = 512;
    const Status s = plan_decode(spec, DeviceInfo::h200(), bad, &plan);
    EXPECT_EQ(s.argument(), option < 3 ? "options.merge" : "options.split_tokens") << s.message();
    EXPECT_NE(s.message().find("decode served by chunked prefill"), std::string::npos) << s.message();
  }
  PlanOptions combine_kernel = o;  // the merge the prefill route uses anyway: allowed
  combine_kernel.merge = Merge::kCombineKernel;
  EXPECT_TRUE(plan_decode(spec, DeviceInfo::h200(), combine_kernel, &plan).ok());
}

TEST(Planner, SpeculativeRowsBeyondTheThirtyTwoRowTileTakeThePrefillRoute) {
  // PlanTuning::prefill_route (docs/TUNING.md): causal rows of 25..64 packed queries per KV
  // head on grids of >= 4 KV heads and >= 64Ki cached tokens run as chunked prefill on
  // prefill_sm90_gqa64, with the prefill planner's splits (B=8 28/4 8k: 32 tiles x 4 splits); rows
  // of 65..128 on prefill_sm90_gqa or prefill_sm90_gqa64 by the grid.
  if (!compiled("prefill_sm90_gqa64", DType::kBF16, 128) || !compiled("prefill_sm90_gqa", DType::kBF16, 128)) {
    GTEST_SKIP() << "this build lacks the route's families for bf16 at D=128 (the route needs them compiled)";
  }
  auto spec = [](int batch, int hq, int hkv, int len, int q_len) {
    DecodeProblem p = decode(batch, hq, hkv, len, 128, q_len);
    p.causal = true;
    return p;
  };
  const Plan routed = plan_or_die(spec(8, 28, 4, 8192, 8));
  EXPECT_TRUE(routed.decode_via_prefill());
  EXPECT_EQ(routed.family(), "prefill_sm90_gqa64");
  EXPECT_EQ(routed.num_splits(), 4) << routed.note();
  EXPECT_NE(routed.note().find("PlanTuning::prefill_route"), std::string::npos) << routed.note();
  for (const DecodeProblem& p : {spec(8, 28, 4, 8192, 5), spec(8, 64, 8, 2048, 8), spec(1, 28, 4, 32768, 8),
                                 spec(8, 8, 1, 8192, 8), spec(4, 28, 4, 8192, 6), spec(8, 28, 4, 8192, 4),
                                 spec(8, 32, 8, 8192, 8), spec(8, 8, 1, 8192, 4)}) {
    EXPECT_TRUE(plan_or_die(p).decode_via_prefill()) << p.num_q_heads << "/" << p.num_kv_heads << " q_len " << p.q_len;
  }
  PlanOptions forced;
  forced.num_splits = 8;
  EXPECT_EQ(plan_or_die(spec(8, 28, 4, 8192, 8), forced).num_splits(), 8);
  // Kept on the decode kernels: 24 rows or fewer, more than 64, non-causal, D != 128, a quantized
  // cache, fewer than 4 KV heads or 64Ki tokens in all, sm_80, and options only decode kernels honour.
  DecodeProblem noncausal = spec(8, 28, 4, 8192, 8);
  noncausal.causal = false;
  DecodeProblem int8 = spec(8, 28, 4, 8192, 8);
  int8.kv_format = KvFormat::kInt8;
  DecodeProblem hd64 = spec(8, 28, 4, 8192, 8);
  hd64.head_dim = 64;
  for (const DecodeProblem& p : {spec(8, 24, 4, 8192, 4), spec(8, 32, 8, 8192, 3), spec(8, 32, 2, 8192, 16), noncausal,
                                 hd64, int8, spec(1, 8, 1, 32768, 8), spec(1, 28, 4, 8192, 8), spec(8, 8, 1, 2048, 8),
                                 spec(1, 8, 1, 16384, 16)}) {
    EXPECT_FALSE(plan_or_die(p).decode_via_prefill())
        << p.batch << " x " << p.num_q_heads << "/" << p.num_kv_heads << " q_len " << p.q_len << " len " << p.max_kv_len;
  }
  // 65..128 rows: the 128-row tile on >= 8 KV heads and 256Ki tokens, else the 64-row one (two per
  // KV head), from 32Ki tokens; groups over 8, which the 64-row tile cannot pack, take the 128-row one.
  const std::pair<DecodeProblem, const char*> wide[] = {
      {spec(8, 28, 4, 8192, 16), "prefill_sm90_gqa"},   {spec(8, 64, 8, 8192, 9), "prefill_sm90_gqa"},
      {spec(1, 64, 8, 32768, 16), "prefill_sm90_gqa"},  {spec(8, 16, 2, 8192, 10), "prefill_sm90_gqa64"},
      {spec(1, 28, 4, 32768, 16), "prefill_sm90_gqa64"}, {spec(1, 8, 1, 32768, 16), "prefill_sm90_gqa64"},
      {spec(2, 64, 4, 8192, 8), "prefill_sm90_gqa"}};
  for (const auto& [p, family] : wide) {
    const Plan w = plan_or_die(p);
    EXPECT_TRUE(w.decode_via_prefill()) << p.batch << " x " << p.num_q_heads << "/" << p.num_kv_heads << " q_len " << p.q_len;
    EXPECT_EQ(w.family(), family) << p.batch << " x " << p.num_q_heads << "/" << p.num_kv_heads << " q_len " << p.q_len;
  }
  DeviceInfo ampere = DeviceInfo::h200();
  ampere.cc_major = 8;
  EXPECT_FALSE(plan_or_die(spec(8, 28, 4, 8192, 8), {}, ampere).decode_via_prefill());
  for (int option = 0; option < 6; ++option) {
    PlanOptions o;
    o.tuning.prefill_route = option != 0;
    if (option >= 1 && option <= 3) {
      o.merge = option == 1 ? Merge::kCluster : option == 2 ? Merge::kFused : Merge::kAtomic;
    }
    o.split_tokens = option == 4 ? 512 : 0;
    if (option == 5) o.family = "decode_mma_m32";
    const Plan kept = plan_or_die(spec(8, 28, 4, 8192, 8), o);
    EXPECT_FALSE(kept.decode_via_prefill()) << "option " << option;
    EXPECT_EQ(kept.family(), "decode_mma_m32") << "option " << option;
  }
}

TEST(Planner, KvHeadsWithMoreThanSixteenPackedRowsTakeThirtyTwoRowTiles) {
  // 28/4 q_len 8: 56 packed rows per KV head -> two 32-row tiles instead of four 16-row ones.
  const Plan m32 = plan_or_die(decode(8, 28, 4, 8192, 128, 8));
  EXPECT_EQ(m32.family(), "decode_mma_m32");
  EXPECT_EQ(m32.block_m(), 32);
  EXPECT_EQ(m32.work_units(), 8 * 4 * 2);
  EXPECT_EQ(plan_or_die(decode(128, 64, 2, 8192)).family(), "decode_mma_m32");  // group 32, one query
  // 28 rows (q_len 4): one 32-row tile per KV head gives 32 work units, x 4 splits of 2048 keys
  // fewer blocks than SMs; the 32-row tile then splits finer, 8 splits of 1024 keys filling the 264
  // block slots (docs/TUNING.md).
  const Plan few_rows = plan_or_die(decode(8, 28, 4, 8192, 128, 4));
  EXPECT_EQ(few_rows.family(), "decode_mma_m32") << few_rows.note();
  EXPECT_EQ(few_rows.work_units(), 8 * 4);
  EXPECT_EQ(few_rows.num_splits(), 8) << few_rows.note();
  // At 64k the wave rule alone gives 7 splits (224 blocks on 264 slots); the 32-row tile fills
  // its slots with 8 (run 40: 259.3 vs 275.0 µs).
  EXPECT_EQ(plan_or_die(decode(8, 28, 4, 65536, 128, 4)).num_splits(), 8);
  // Where even 1024-key splits leave SMs without a block (4 x 4 work units, 4k keys: 4 splits, 64
  // blocks) and two 16-row tiles make a larger grid, decode_mma serves (run 32).
  const Plan short_rows = plan_or_die(decode(4, 28, 4, 4096, 128, 4));
  EXPECT_EQ(short_rows.family(), "decode_mma") << short_rows.note();
  EXPECT_EQ(short_rows.work_units(), 4 * 4 * 2);
  // Forced splits are kept as given.
  PlanOptions forced;
  forced.num_splits = 4;
  EXPECT_EQ(plan_or_die(decode(8, 28, 4, 8192, 128, 4), forced).num_splits(), 4);
  // 16 rows or fewer fill decode_mma's tile.
  EXPECT_EQ(plan_or_die(decode(8, 32, 8, 8192, 128, 4)).family(), "decode_mma");
  // Not served by the 32-row family: D=256 and quantized caches.
  EXPECT_EQ(plan_or_die(decode(2, 32, 8, 1000, 256, 8)).family(), "decode_mma");
  DecodeProblem int4 = decode(8, 28, 4, 8192, 128, 8);
  int4.kv_format = KvFormat::kInt4;
  EXPECT_EQ(plan_or_die(int4).family(), "decode_quant");
  // By name: decode_mma still serves many rows; decode_mma_m32 refuses few, naming q_len.
  PlanOptions mma;
  mma.family = "decode_mma";
  EXPECT_EQ(plan_or_die(decode(8, 28, 4, 8192, 128, 8), mma).block_m(), 16);
  PlanOptions named;
  named.family = "decode_mma_m32";
  Plan plan;
  const Status s = plan_decode(decode(8, 32, 8, 8192, 128, 2), DeviceInfo::h200(), named, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.argument(), "q_len") << s.message();
}

// prefill_sm90 tiles with two Q buffers (head dims <= 128) run on a persistent grid of at most one
// block per SM; causal, varlen and cache problems claim tiles from a counter at the end of the
// workspace, uniform ones take a fixed stride; D=256 and the mma.sync family keep a block per tile.
TEST(Planner, HopperPrefillTilesRunOnAPersistentGrid) {
  PlanOptions sm90;
  sm90.family = "prefill_sm90";
  Plan plan;
  ASSERT_TRUE(plan_prefill(prefill(16, 16, 1024), DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 132);  // 8 x 16 x 16 = 2048 tiles
  EXPECT_FALSE(plan.dynamic_tiles());
  EXPECT_EQ(plan.workspace_bytes(), 0u);  // (whole tiles: 8 key steps each, see the stream-K test below)
  EXPECT_NE(describe(plan).find("persistent: 132 blocks"), std::string::npos) << describe(plan);
  ASSERT_TRUE(plan_prefill(prefill(16, 16, 1024, true), DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 132);
  EXPECT_TRUE(plan.dynamic_tiles());
  EXPECT_FALSE(plan.stream_k());
  EXPECT_EQ(plan.workspace_bytes(), plan::kTileCounterBytes);
  PlanOptions unsplit = sm90;
  unsplit.strategy = Strategy::kSplitQ;
  ASSERT_TRUE(plan_prefill(prefill(1, 2, 300, true), DeviceInfo::h200(), unsplit, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 0);  // 6 tiles, fewer than SMs: a block per tile, no counter
  EXPECT_FALSE(plan.dynamic_tiles());
  EXPECT_EQ(plan.workspace_bytes(), 0u);
  DeviceInfo six = DeviceInfo::h200();
  six.sm_count = 6;
  ASSERT_TRUE(plan_prefill(prefill(1, 2, 300, true), six, unsplit, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 0);  // as many tiles as SMs
  six.sm_count = 5;
  ASSERT_TRUE(plan_prefill(prefill(1, 2, 300, true), six, unsplit, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 5);  // one tile more than SMs
  EXPECT_TRUE(plan.dynamic_tiles());
  PlanOptions splits = sm90;
  splits.strategy = Strategy::kSplitKV;
  splits.num_splits = 3;
  ASSERT_TRUE(plan_prefill(prefill(1, 2, 4096, true), DeviceInfo::h200(), splits, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 132);  // 32 x 2 x 3 tiles
  EXPECT_FALSE(plan.stream_k());
  EXPECT_EQ(plan.workspace_bytes(), plan::split_workspace(3, 2 * 4096, 128).total_bytes + plan::kTileCounterBytes);
  PlanOptions one_tile_per_block = sm90;
  one_tile_per_block.tuning.persistent_prefill = false;
  ASSERT_TRUE(plan_prefill(prefill(16, 16, 1024, true), DeviceInfo::h200(), one_tile_per_block, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 0);
  EXPECT_FALSE(plan.dynamic_tiles());
  EXPECT_EQ(plan.workspace_bytes(), 0u);
  PrefillProblem d256 = prefill(2, 8, 1000);
  d256.head_dim = 256;
  ASSERT_TRUE(plan_prefill(d256, DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 0);
  PlanOptions mma;
  mma.family = "prefill_mma";
  ASSERT_TRUE(plan_prefill(prefill(16, 16, 1024, true), DeviceInfo::h200(), mma, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 0);
  EXPECT_FALSE(plan.dynamic_tiles());
}

// A static persistent grid whose last round of tiles would leave more than a fifth of the blocks idle
// ends in a stream-K tail: every round but the last whole one by the stride, then equal key-step
// ranges; its workspace (after anything else) holds one slot per block boundary. Not for tiles of
// fewer than 16 key steps, causal, split, two-pass or packed problems, nor where the tiles fill the
// last round (nearly) whole.
TEST(Planner, StreamKTailWhereTheLastRoundLeavesBlocksIdle) {
  PlanOptions sm90;
  sm90.family = "prefill_sm90";
  Plan plan;
  ASSERT_TRUE(plan_prefill(prefill(4, 16, 4096), DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_TRUE(plan.stream_k());  // 2048 tiles: 15 rounds and 68 of 132 blocks
  EXPECT_EQ(plan.stream_k_first_tile(), 14 * 132);
  EXPECT_EQ(plan.stream_k_steps(), 32);  // 4096 keys in 128-key steps
  EXPECT_EQ(plan.stream_k_workspace_offset(), 0u);
  EXPECT_EQ(plan.workspace_bytes(), plan::stream_k_workspace(0, 131, 128, 128).total_bytes);
  EXPECT_NE(describe(plan).find("stream-K tail"), std::string::npos) << describe(plan);
  PlanOptions off = sm90;
  off.tuning.stream_k_prefill = false;
  ASSERT_TRUE(plan_prefill(prefill(4, 16, 4096), DeviceInfo::h200(), off, &plan).ok());
  EXPECT_FALSE(plan.stream_k());
  EXPECT_EQ(plan.workspace_bytes(), 0u);
  ASSERT_TRUE(plan_prefill(prefill(16, 16, 1024), DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_FALSE(plan.stream_k());  // 2048 tiles again, of 8 key steps
  // 11 x 6 heads x 32 tiles = 2112 = 16 x 132: whole rounds.
  PrefillProblem whole = prefill(11, 6, 4096);
  ASSERT_TRUE(plan_prefill(whole, DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_FALSE(plan.stream_k());
  // 12 heads x 20 tiles = 240 = 132 + 108: the last round fills 108 of 132 blocks (> 4/5); on
  // 140 SMs 140 + 100 (< 4/5), every tile in the tail.
  PrefillProblem nearly = prefill(1, 12, 2560);
  ASSERT_TRUE(plan_prefill(nearly, DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_EQ(plan.persistent_blocks(), 132);
  EXPECT_FALSE(plan.stream_k());
  DeviceInfo more = DeviceInfo::h200();
  more.sm_count = 140;
  ASSERT_TRUE(plan_prefill(nearly, more, sm90, &plan).ok());
  EXPECT_TRUE(plan.stream_k());
  EXPECT_EQ(plan.stream_k_first_tile(), 0);
  // D=64's 192-row tile: three consumer warpgroups per slot.
  PrefillProblem d64 = prefill(4, 12, 8192);
  d64.head_dim = 64;
  d64.dtype = DType::kF16;
  PlanOptions m192;
  m192.family = "prefill_sm90_m192";
  ASSERT_TRUE(plan_prefill(d64, DeviceInfo::h200(), m192, &plan).ok());
  EXPECT_TRUE(plan.stream_k());  // 43 x 48 = 2064 tiles: 15 rounds and 84 blocks
  EXPECT_EQ(plan.stream_k_first_tile(), 14 * 132);
  EXPECT_EQ(plan.stream_k_steps(), 64);
  EXPECT_EQ(plan.workspace_bytes(), plan::stream_k_workspace(0, 131, 192, 64).total_bytes);
  // Unequal tiles, splits, two passes, packed heads: whole tiles.
  ASSERT_TRUE(plan_prefill(prefill(4, 16, 4096, true), DeviceInfo::h200(), sm90, &plan).ok());
  EXPECT_FALSE(plan.stream_k());
  PlanOptions splits = sm90;
  splits.strategy = Strategy::kSplitKV;
  splits.num_splits = 3;
  ASSERT_TRUE(plan_prefill(prefill(1, 16, 4096), DeviceInfo::h200(), splits, &plan).ok());
  EXPECT_GT(plan.persistent_blocks(), 0);
  EXPECT_FALSE(plan.stream_k());
  PlanOptions two_pass;
  two_pass.strategy = Strategy::kTwoPass;
  two_pass.family = "prefill_sm90_twopass";
  ASSERT_TRUE(plan_prefill(prefill(4, 16, 4096), DeviceInfo::h200(), two_pass, &plan).ok());
  EXPECT_FALSE(plan.stream_k());
  PlanOptions packed;
  packed.family = "prefill_sm90_gqa";
  PrefillProblem gqa = prefill(4, 32, 4096);
  gqa.num_kv_heads = 8;
  ASSERT_TRUE(plan_prefill(gqa, DeviceInfo::h200(), packed, &plan).ok());
  EXPECT_FALSE(plan.stream_k());
}

TEST(Planner, TheFamilyServingTheStrategyIsChosenAndRecorded) {
  // At most 8 packed rows per KV head: the keys-as-rows tile; more: decode_mma's 16-row tile.
  EXPECT_EQ(plan_or_die(decode(1, 32, 8, 4096)).family(), "decode_mma_n8");
  EXPECT_EQ(plan_or_die(decode(1, 64, 8, 4096)).family(), "decode_mma_n8");
  EXPECT_EQ(plan_or_die(decode(1, 72, 8, 4096)).family(), "decode_mma");
  Plan plan;
  DeviceInfo ampere = DeviceInfo::h200();
  ampere.cc_major = 8;
  ASSERT_TRUE(plan_prefill(prefill(2, 8, 1000), ampere, {}, &plan).ok());
  EXPECT_EQ(plan.family(), "prefill_mma");  // never the by-name-only k16v64 family; sm90a needs sm_90
  ASSERT_TRUE(plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), {}, &plan).ok());
  // On sm_90 the Hopper family wins where this build compiled it (or where neither is compiled).
  const bool mma_only =
      compiled("prefill_mma", DType::kBF16, 128) && !compiled("prefill_sm90", DType::kBF16, 128);
  EXPECT_EQ(plan.family(), mma_only ? "prefill_mma" : "prefill_sm90");
  PrefillProblem d256 = prefill(2, 8, 1000);
  d256.head_dim = 256;  // served by the Hopper family alone (its 80-key tile where compiled)
  ASSERT_TRUE(plan_prefill(d256, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_EQ(plan.family(), compiled("prefill_sm90_n80", DType::kBF16, 256) ? "prefill_sm90_n80" : "prefill_sm90");
  EXPECT_EQ(plan_prefill(d256, ampere, {}, &plan).argument(), "device");
  PlanOptions o;
  o.strategy = Strategy::kSplitV;
  ASSERT_TRUE(plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), o, &plan).ok());
  EXPECT_EQ(plan.family(), "prefill_mma_splitv");
  o.strategy = Strategy::kTwoPass;
  ASSERT_TRUE(plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), o, &plan).ok());
  EXPECT_EQ(plan.family(), "prefill_mma_twopass");
  EXPECT_NE(describe(plan).find("family: prefill_mma_twopass"), std::string::npos);
}

TEST(Planner, ForcedFamiliesAreCheckedAgainstKindProblemAndDevice) {
  auto code_and_argument = [](Status s) { return std::make_pair(s.code(), s.argument()); };
  Plan plan;
  PlanOptions o;
  o.family = "no_such_family";
  EXPECT_EQ(code_and_argument(plan_decode(decode(1, 8, 8, 100), DeviceInfo::h200(), o, &plan)),
            std::make_pair(StatusCode::kInvalidArgument, std::string("options.family")));
  o.family = "prefill_mma_twopass";  // a prefill family that reads no KV cache, for a decode problem
  EXPECT_EQ(code_and_argument(plan_decode(decode(1, 8, 8, 100), DeviceInfo::h200(), o, &plan)),
            std::make_pair(StatusCode::kInvalidArgument, std::string("options.family")));
  o.family = "prefill_mma";  // one that reads caches serves decode as chunked prefill
  ASSERT_TRUE(plan_decode(decode(1, 8, 8, 100), DeviceInfo::h200(), o, &plan).ok());
  EXPECT_TRUE(plan.decode_via_prefill());
  o.family = "combine";
  EXPECT_EQ(plan_prefill(prefill(1, 2, 64), DeviceInfo::h200(), o, &plan).argument(), "options.family");
  o.family = "decode_mma";
  ASSERT_TRUE(plan_decode(decode(1, 8, 8, 100), DeviceInfo::h200(), o, &plan).ok());
  EXPECT_EQ(plan.family(), "decode_mma");
  PrefillProblem d256 = prefill(1, 2, 64);
  d256.head_dim = 256;  // no prefill_mma instantiation at 256
  o.family = "prefill_mma";
  EXPECT_EQ(code_and_argument(plan_prefill(d256, DeviceInfo::h200(), o, &plan)),
            std::make_pair(StatusCode::kUnsupported, std::string("head_dim")));
  DeviceInfo volta = DeviceInfo::h200();
  volta.cc_major = 7;
  EXPECT_EQ(code_and_argument(plan_decode(decode(1, 8, 8, 100), volta, {}, &plan)),
            std::make_pair(StatusCode::kUnsupported, std::string("device")));
}

TEST(Planner, GridLimitsNameTheProblemSize) {
  Plan plan;
  const Status s = plan_decode(decode(70000, 8, 8, 100), DeviceInfo::h200(), {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.argument(), "batch");
  // 16 queries x group 64 = 1024 packed rows = 64 tiles per KV head; 2048 KV heads -> 131072 > 65535.
  EXPECT_EQ(plan_decode(decode(1, 2048 * 64, 2048, 100, 128, 16), DeviceInfo::h200(), {}, &plan).argument(),
            "num_q_heads");
}

TEST(Planner, DescribeMentionsTheDecision) {
  const std::string text = describe(plan_or_die(decode(1, 32, 8, 65536)));
  EXPECT_NE(text.find("split-kv"), std::string::npos);
  EXPECT_NE(text.find("workspace"), std::string::npos);
}

TEST(Planner, FusedCombineIsOptInAndAddsItsCounters) {
  const Plan plain = plan_or_die(decode(2, 32, 8, 65536));
  ASSERT_GT(plain.num_splits(), 1);
  EXPECT_FALSE(plain.fused_combine());  // default: the combine kernel
  PlanOptions on;
  on.merge = Merge::kFused;
  const Plan fused = plan_or_die(decode(2, 32, 8, 65536), on);
  EXPECT_TRUE(fused.fused_combine());
  EXPECT_EQ(fused.num_splits(), plain.num_splits());
  EXPECT_GT(fused.workspace_bytes(), plain.workspace_bytes());  // one counter per (sequence, KV head, query tile)
  EXPECT_NE(describe(fused).find("last split block"), std::string::npos) << describe(fused);
  PlanOptions one = on;
  one.num_splits = 1;  // nothing to merge
  EXPECT_FALSE(plan_or_die(decode(2, 32, 8, 65536), one).fused_combine());
  PlanOptions invariant = on;
  invariant.split_tokens = 8192;  // batch-invariant mode: the same merge code, so allowed
  EXPECT_TRUE(plan_or_die(decode(2, 32, 8, 65536), invariant).fused_combine());
}

TEST(Planner, AtomicCombineIsOptInAndRefusedInBatchInvariantMode) {
  const Plan plain = plan_or_die(decode(2, 32, 8, 65536));
  EXPECT_FALSE(plain.atomic_combine());  // default: the combine kernel
  PlanOptions on;
  on.merge = Merge::kAtomic;
  on.atomic_reference_lse = 7.5f;
  const Plan atomic = plan_or_die(decode(2, 32, 8, 65536), on);
  EXPECT_TRUE(atomic.atomic_combine());
  EXPECT_EQ(atomic.atomic_reference_lse(), 7.5f);
  EXPECT_EQ(atomic.num_splits(), plain.num_splits());
  // The partials stay (the fallback), plus fp32 accumulators for every row: [rows, D] and [rows].
  const size_t rows = 2 * 32;
  EXPECT_GE(atomic.workspace_bytes(), plain.workspace_bytes() + rows * (128 + 1) * sizeof(float));
  EXPECT_NE(describe(atomic).find("nondeterministic"), std::string::npos) << describe(atomic);
  PlanOptions one = on;
  one.num_splits = 1;  // nothing to merge
  EXPECT_FALSE(plan_or_die(decode(2, 32, 8, 65536), one).atomic_combine());
  auto refused = [&](PlanOptions o, const char* argument) {
    Plan plan;
    const Status s = plan_decode(decode(2, 32, 8, 65536), DeviceInfo::h200(), o, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_EQ(s.argument(), argument) << s.message();
  };
  PlanOptions invariant = on;
  invariant.split_tokens = 8192;
  refused(invariant, "options.merge");
  PlanOptions unknown = on;
  unknown.merge = static_cast<Merge>(7);
  refused(unknown, "options.merge");
  PlanOptions nan = on;
  nan.atomic_reference_lse = std::numeric_limits<float>::quiet_NaN();
  refused(nan, "options.atomic_reference_lse");
  Plan plan;
  EXPECT_EQ(plan_prefill(prefill(2, 8, 1000), DeviceInfo::h200(), on, &plan).code(), StatusCode::kUnsupported);
  // prepare_workspace checks the workspace an atomic plan needs.
  EXPECT_FALSE(prepare_workspace(atomic, nullptr, 0, nullptr).ok());
}

TEST(Planner, PrepareWorkspaceChecksItsArguments) {
  // Plans without a fused combine need no preparation: nothing is checked or touched.
  EXPECT_TRUE(prepare_workspace(plan_or_die(decode(2, 32, 8, 65536)), nullptr, 0, nullptr).ok());
  PlanOptions on;
  on.merge = Merge::kFused;
  const Plan fused = plan_or_die(decode(2, 32, 8, 65536), on);
  const Status s = prepare_workspace(fused, nullptr, 0, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.argument().empty()) << s.message();
}

}  // namespace
}  // namespace splitkv

namespace splitkv {
namespace {

TEST(Planner, ClusterCombineIsOptInAndOnlyWhereItFits) {
  EXPECT_FALSE(plan_or_die(decode(1, 32, 8, 65536)).cluster_combine());  // default: combine kernel
  PlanOptions on;
  on.merge = Merge::kCluster;
  const Plan plan = plan_or_die(decode(1, 32, 8, 65536), on);
  ASSERT_GT(plan.num_splits(), 1);
  ASSERT_LE(plan.num_splits(), 16);
  EXPECT_TRUE(plan.cluster_combine());
  EXPECT_EQ(plan.workspace_bytes(), 0u);  // no partials in global memory
  PlanOptions many = on;
  many.num_splits = 40;  // more splits than a cluster holds
  EXPECT_FALSE(plan_or_die(decode(1, 32, 8, 65536), many).cluster_combine());
  PlanOptions invariant = on;
  invariant.split_tokens = 8192;  // batch-invariant mode keeps the combine kernel
  EXPECT_FALSE(plan_or_die(decode(1, 32, 8, 65536), invariant).cluster_combine());
  DeviceInfo ampere = DeviceInfo::h200();
  ampere.cc_major = 8;
  EXPECT_FALSE(plan_or_die(decode(1, 32, 8, 65536), on, ampere).cluster_combine());
}

}  // namespace
}  // namespace splitkv

namespace splitkv {
namespace {

// Whatever the caller chose about splits or merging stays as chosen, and sm_80 has no clusters: none
// of these takes Merge::kAuto's cluster merge on a problem that takes it by default.
// forced_splits: a count the caller forces.
void expect_callers_choices_keep_their_merge(const DecodeProblem& problem, int forced_splits) {
  PlanOptions off;
  off.merge = Merge::kCombineKernel;
  const Plan kept = plan_or_die(problem, off);
  EXPECT_FALSE(kept.cluster_combine());
  EXPECT_GT(kept.workspace_bytes(), 0u);
  PlanOptions forced;
  forced.num_splits = forced_splits;
  EXPECT_FALSE(plan_or_die(problem, forced).cluster_combine());
  PlanOptions invariant;
  invariant.split_tokens = 128;
  EXPECT_FALSE(plan_or_die(problem, invariant).cluster_combine());
  PlanOptions fused;
  fused.merge = Merge::kFused;
  const Plan fused_plan = plan_or_die(problem, fused);
  EXPECT_FALSE(fused_plan.cluster_combine());
  EXPECT_TRUE(fused_plan.fused_combine());
  PlanOptions atomic;
  atomic.merge = Merge::kAtomic;
  const Plan atomic_plan = plan_or_die(problem, atomic);
  EXPECT_FALSE(atomic_plan.cluster_combine());
  EXPECT_TRUE(atomic_plan.atomic_combine());
  DeviceInfo ampere = DeviceInfo::h200();
  ampere.cc_major = 8;
  EXPECT_FALSE(plan_or_die(problem, {}, ampere).cluster_combine());
}

TEST(Planner, TwoPlannedSplitsMergeInClustersOfTwo) {
  // B=8 32/8: 64 work units, the wave rule plans 2 splits; single-query 16-bit rows merge them in
  // clusters of 2 (run 54), with no partials in the workspace.
  for (int len : {8192, 32768, 131072}) {
    const Plan pair = plan_or_die(decode(8, 32, 8, len));
    EXPECT_EQ(pair.num_splits(), 2) << pair.note();
    EXPECT_TRUE(pair.cluster_combine()) << pair.note();
    EXPECT_EQ(pair.workspace_bytes(), 0u);
    EXPECT_NE(pair.note().find("clusters of 2"), std::string::npos) << pair.note();
  }
  DecodeProblem paged = decode(8, 32, 8, 32768);
  paged.page_size = 16;
  EXPECT_TRUE(plan_or_die(paged).cluster_combine());
  // Not where it was measured slower or not measured: 4 splits, quantized caches, several queries;
  // and the caller's own choices keep the combine kernel.
  const Plan four = plan_or_die(decode(4, 32, 8, 16384));
  EXPECT_EQ(four.num_splits(), 4);
  EXPECT_FALSE(four.cluster_combine());
  DecodeProblem quant = decode(8, 32, 8, 32768);
  quant.kv_format = KvFormat::kInt8;
  EXPECT_FALSE(plan_or_die(quant).cluster_combine());
  EXPECT_FALSE(plan_or_die(decode(8, 32, 8, 32768, 128, 2)).cluster_combine());
  expect_callers_choices_keep_their_merge(decode(8, 32, 8, 32768), 2);
}

TEST(Planner, L2PrefetchBeforeThePdlWait) {
  // sm_90: every decode plan prefetches its Q rows and lengths; keys only on grids two launches fit
  // (run 55): whole splits of <= 256 keys, else the first 32, but not where the next launch follows
  // with no combine kernel between (a cluster merge, one split) and this one reads more than L2.
  const Plan one_k = plan_or_die(decode(1, 32, 8, 1024));  // 8 splits of 128 keys, 64 blocks
  EXPECT_TRUE(one_k.l2_prefetch());
  EXPECT_EQ(one_k.l2_prefetch_keys(), 128) << one_k.note();
  EXPECT_NE(one_k.note().find("prefetch their first 128 keys"), std::string::npos) << one_k.note();
  EXPECT_EQ(plan_or_die(decode(1, 32, 8, 2048)).l2_prefetch_keys(), plan::kL2PrefetchWholeSplitMaxKeys);
  EXPECT_EQ(plan_or_die(decode(1, 32, 8, 4096)).l2_prefetch_keys(), plan::kL2PrefetchLeadKeys);
  EXPECT_EQ(plan_or_die(decode(1, 32, 8, 65536)).l2_prefetch_keys(), plan::kL2PrefetchLeadKeys);
  EXPECT_EQ(plan_or_die(decode(4, 32, 8, 16384)).l2_prefetch_keys(), plan::kL2PrefetchLeadKeys);  // combine kernel
  const Plan pair = plan_or_die(decode(8, 32, 8, 8192));  // clusters of 2, 268 MB
  ASSERT_TRUE(pair.cluster_combine());
  EXPECT_TRUE(pair.l2_prefetch());
  EXPECT_EQ(pair.l2_prefetch_keys(), 0);
  PlanOptions combine_kernel;
  combine_kernel.merge = Merge::kCombineKernel;
  EXPECT_EQ(plan_or_die(decode(8, 32, 8, 8192), combine_kernel).l2_prefetch_keys(), plan::kL2PrefetchLeadKeys);
  EXPECT_EQ(plan_or_die(decode(16, 32, 8, 4096)).l2_prefetch_keys(), 0);   // one split, 268 MB
  EXPECT_EQ(plan_or_die(decode(32, 32, 8, 4096)).l2_prefetch_keys(), 0);   // 256 blocks: no room for the next launch
  EXPECT_EQ(plan_or_die(decode(128, 32, 8, 1024)).l2_prefetch_keys(), 0);
  // FP8 and INT8 caches merged by the combine kernel: the first 128 keys of splits up to 512 keys
  // (4k: 16 splits of 256; 8k: 16 of 512); a cluster merge (2k) keeps the whole split; 64k's 256
  // blocks leave no room for the next launch.
  for (const KvFormat format : {KvFormat::kFP8E4M3, KvFormat::kInt8}) {
    auto quant = [&](int batch, int len) {
      DecodeProblem p = decode(batch, 32, 8, len);
      p.kv_format = format;
      return plan_or_die(p);
    };
    const Plan four_k = quant(1, 4096);
    ASSERT_FALSE(four_k.cluster_combine());
    EXPECT_EQ(four_k.l2_prefetch_keys(), plan::kL2PrefetchQuant8LeadKeys) << four_k.note();
    EXPECT_EQ(quant(1, 8192).l2_prefetch_keys(), plan::kL2PrefetchQuant8LeadKeys) << quant(1, 8192).note();
    const Plan two_k = quant(1, 2048);
    ASSERT_TRUE(two_k.cluster_combine());
    EXPECT_EQ(two_k.l2_prefetch_keys(), 256) << two_k.note();
    EXPECT_EQ(quant(1, 65536).l2_prefetch_keys(), 0) << quant(1, 65536).note();
    DecodeProblem d64 = decode(1, 64, 8, 8192, 64);  // D=64: not measured, the 16-bit rule
    d64.kv_format = format;
    EXPECT_EQ(plan_or_die(d64).l2_prefetch_keys(), plan::kL2PrefetchLeadKeys) << plan_or_die(d64).note();
  }
  // The caller's choices, and sm_80 (no programmatic dependent launch): nothing there.
  PlanOptions forced;
  forced.tuning.l2_prefetch_keys = 48;
  EXPECT_EQ(plan_or_die(decode(32, 32, 8, 4096), forced).l2_prefetch_keys(), 48);
  PlanOptions none;
  none.tuning.l2_prefetch = false;
  const Plan off = plan_or_die(decode(1, 32, 8, 1024), none);
  EXPECT_FALSE(off.l2_prefetch());
  EXPECT_EQ(off.l2_prefetch_keys(), 0);
  DeviceInfo ampere = DeviceInfo::h200();
  ampere.cc_major = 8;
  const Plan sm80 = plan_or_die(decode(1, 32, 8, 1024), {}, ampere);
  EXPECT_FALSE(sm80.l2_prefetch());
  EXPECT_EQ(sm80.l2_prefetch_keys(), 0);
  // A count the device cannot run is refused, not dropped.
  Plan refused;
  EXPECT_EQ(plan_decode(decode(1, 32, 8, 1024), ampere, forced, &refused).argument(), "options.tuning.l2_prefetch_keys");
  // Bad values name the option.
  Plan plan;
  PlanOptions bad;
  bad.tuning.l2_prefetch_keys = -2;
  Status s = plan_decode(decode(1, 32, 8, 1024), DeviceInfo::h200(), bad, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("options.tuning.l2_prefetch_keys"), std::string::npos) << s.message();
  bad.tuning.l2_prefetch_keys = 16;
  bad.tuning.l2_prefetch = false;
  s = plan_decode(decode(1, 32, 8, 1024), DeviceInfo::h200(), bad, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("options.tuning.l2_prefetch"), std::string::npos) << s.message();
}

TEST(Planner, ShortRowsOnSmallGridsMergeInAClusterByDefault) {
  // B=1 32/8: 8 work units; 16-bit rows of <= 4096 keys take 8 splits merged in a cluster (run 44).
  const Plan short_row = plan_or_die(decode(1, 32, 8, 1024));
  EXPECT_TRUE(short_row.cluster_combine()) << short_row.note();
  EXPECT_EQ(short_row.num_splits(), 8);
  EXPECT_EQ(short_row.workspace_bytes(), 0u);
  EXPECT_NE(short_row.note().find("Merge::kAuto"), std::string::npos) << short_row.note();
  EXPECT_TRUE(plan_or_die(decode(1, 32, 8, 2048)).cluster_combine());
  EXPECT_FALSE(plan_or_die(decode(2, 32, 8, 1024)).cluster_combine());  // 16 x 8 blocks > 132 / 2 (run 44: slower)
  EXPECT_TRUE(plan_or_die(decode(1, 32, 8, 4096)).cluster_combine());   // 16-bit: faster up to 4k (run 44)
  EXPECT_FALSE(plan_or_die(decode(1, 32, 8, 8192)).cluster_combine());  // measured slower at 8k
  EXPECT_FALSE(plan_or_die(decode(4, 32, 8, 1024)).cluster_combine());  // 32 x 8 blocks > 132 SMs
  // Quantized caches too (run 44: 5-13% faster at 1-2k with the push merge), on their 8-row tile.
  for (KvFormat f : {KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    DecodeProblem quant = decode(1, 32, 8, 1024);
    quant.kv_format = f;
    const Plan q = plan_or_die(quant);
    EXPECT_TRUE(q.cluster_combine()) << q.note();
    EXPECT_EQ(q.num_splits(), 8) << q.note();
    quant.max_kv_len = 4096;
    EXPECT_FALSE(plan_or_die(quant).cluster_combine());
  }
  expect_callers_choices_keep_their_merge(decode(1, 32, 8, 1024), 16);
  // Not on 32-row tiles (not measured).
  EXPECT_FALSE(plan_or_die(decode(1, 28, 4, 1024, 128, 8)).cluster_combine());
}

}  // namespace
}  // namespace splitkv

namespace splitkv {
namespace {

TEST(TileTable, ClusterInboxHoldsEveryRankCountsPartials) {
  // cluster_combine.cuh: owner k of `ranks` keeps ceil(chunks / ranks) slots x rows x ranks float4s,
  // then ranks x rows LSEs; the reservation must hold that for every cluster size the planner allows,
  // and every decode tile's merge region (which the rings overlay) must hold the inbox.
  for (int head_dim : {64, 128, 256}) {
    for (int block_m : {8, 16, 32}) {
      const int chunks = head_dim / 4;
      const int reserved = tiles::cluster_inbox_bytes(block_m, head_dim);
      for (int ranks = 2; ranks <= plan::kMaxClusterSplits; ++ranks) {
        const int slots = (chunks + ranks - 1) / ranks;
        const int o_bytes = slots * block_m * ranks * 16;
        const int lse_offset = block_m * (chunks + tiles::kMaxClusterRanks - 1) * 16;
        EXPECT_LE(o_bytes, lse_offset) << head_dim << " " << block_m << " " << ranks;
        EXPECT_LE(lse_offset + ranks * block_m * 4, reserved) << head_dim << " " << block_m << " " << ranks;
      }
    }
    for (int block_m : {16, 32}) {
      const tiles::DecodeTile t = tiles::decode_tile(head_dim, block_m);
      EXPECT_GE(t.smem_bytes() - t.q_smem_bytes(), t.merge_smem_bytes()) << head_dim << " " << block_m;
    }
  }
}

}  // namespace
}  // namespace splitkv
