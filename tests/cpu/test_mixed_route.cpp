// The mixed route's plan and its row rule on the host (docs/MIXED_BATCH.md): which problems take
// it, the decode parts' plans, the workspace's layout and the persistent grid's cap; which
// sequences are decode rows of which part (mixed_decode_part, the function the split and merge
// kernels run).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/block_table.hpp"
#include "kernels/mixed/mixed_route_params.hpp"
#include "plan/workspace_layout.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv {
namespace {

// A serving step's bounds: 256 sequences, 4096 query tokens, 32k keys, a paged bf16 cache.
PrefillProblem step() {
  PrefillProblem p;
  p.batch = 256, p.num_q_heads = 32, p.num_kv_heads = 8, p.head_dim = 128;
  p.max_q_len = 4096, p.max_kv_len = 32768;
  p.varlen = true, p.causal = true, p.kv_cache = true, p.page_size = 16;
  return p;
}

PlanOptions mixed() { return PlanOptions{}; }  // the route is on by default

PlanOptions unrouted() {
  PlanOptions o;
  o.tuning.mixed_route = false;
  return o;
}

TEST(MixedRoute, OnByDefaultForAPagedVarlenCacheOffWhenAsked) {
  Plan plain, routed;
  ASSERT_TRUE(plan_prefill(step(), DeviceInfo::h200(), unrouted(), &plain).ok());
  EXPECT_FALSE(plain.mixed_route());
  EXPECT_EQ(plain.note().find("mixed route"), std::string::npos) << plain.note();
  ASSERT_TRUE(plan_prefill(step(), DeviceInfo::h200(), mixed(), &routed).ok());
  if (!routed.mixed_route()) GTEST_SKIP() << "this build lacks the decode part's family: " << describe(routed);
  // Two decode parts, as separate calls would plan them: single-query rows and rows of 2-4 queries.
  const Plan& single = *routed.mixed_decode_plan();
  ASSERT_NE(routed.mixed_spec_plan(), nullptr);
  const Plan& spec = *routed.mixed_spec_plan();
  EXPECT_EQ(routed.mixed_decode_q(), 4);  // 16 packed rows / a group of 4
  EXPECT_EQ(single.decode().q_len, 1);
  EXPECT_EQ(spec.decode().q_len, 4);
  for (const Plan* d : {&single, &spec}) {
    EXPECT_EQ(d->decode().batch, 256);
    EXPECT_EQ(d->decode().max_kv_len, 32768);
    EXPECT_FALSE(d->decode_via_prefill());
    EXPECT_EQ(d->launch_smem_bytes(), 0) << "no even placement beside the prefill grid";
  }
  EXPECT_EQ(routed.family(), plain.family());
  // The workspace: the prefill's own, then each decode plan's, then the scratch.
  EXPECT_GE(routed.mixed_decode_offset(), plain.workspace_bytes());
  EXPECT_GE(routed.mixed_spec_offset(), routed.mixed_decode_offset() + single.workspace_bytes());
  EXPECT_GE(routed.mixed_scratch_offset(), routed.mixed_spec_offset() + spec.workspace_bytes());
  EXPECT_EQ(routed.workspace_bytes(),
            routed.mixed_scratch_offset() + plan::mixed_scratch(256, 4, 32, 128, 2048).total_bytes);
  if (plain.persistent_blocks() > 0) {
    // Launched whole (a step without decode rows uses every block); with decode rows a share of
    // its blocks walks the tiles, the rest leave their SMs to the decode parts.
    EXPECT_EQ(routed.persistent_blocks(), plain.persistent_blocks());
    EXPECT_GT(routed.mixed_beside_blocks(), 0);
    EXPECT_LT(routed.mixed_beside_blocks(), plain.persistent_blocks());
    EXPECT_NE(describe(routed).find("where the step has decode rows"), std::string::npos) << describe(routed);
  }
  EXPECT_NE(describe(routed).find("mixed route"), std::string::npos) << describe(routed);
  EXPECT_NE(routed.seal(), plain.seal());
}

TEST(MixedRoute, TheSerialRouteKeepsTheWholeGridAndItsOwnSeal) {
  Plan plain, side_by_side, serial;
  PlanOptions o = mixed();
  o.tuning.mixed_route_serial = true;
  ASSERT_TRUE(plan_prefill(step(), DeviceInfo::h200(), unrouted(), &plain).ok());
  ASSERT_TRUE(plan_prefill(step(), DeviceInfo::h200(), mixed(), &side_by_side).ok());
  ASSERT_TRUE(plan_prefill(step(), DeviceInfo::h200(), o, &serial).ok());
  if (!serial.mixed_route()) GTEST_SKIP() << "this build lacks the decode part's family: " << describe(serial);
  EXPECT_TRUE(serial.mixed_serial());
  EXPECT_FALSE(side_by_side.mixed_serial());
  EXPECT_EQ(serial.persistent_blocks(), plain.persistent_blocks()) << "the prefill part runs alone first";
  EXPECT_EQ(serial.mixed_beside_blocks(), 0);
  EXPECT_EQ(serial.workspace_bytes(), side_by_side.workspace_bytes());
  EXPECT_NE(describe(serial).find("after the prefill tiles"), std::string::npos) << describe(serial);
  EXPECT_NE(serial.seal(), side_by_side.seal());
  // Without mixed_route the switch changes nothing.
  PlanOptions alone = unrouted();
  alone.tuning.mixed_route_serial = true;
  Plan unrouted;
  ASSERT_TRUE(plan_prefill(step(), DeviceInfo::h200(), alone, &unrouted).ok());
  EXPECT_FALSE(unrouted.mixed_route());
  EXPECT_FALSE(unrouted.mixed_serial());
  EXPECT_EQ(unrouted.seal(), plain.seal());
}

TEST(MixedRoute, NotTakenWhereItDoesNotApplyAndSaysWhy) {
  // Problems without a paged cache's varlen queries are no serving step: nothing to say.
  PrefillProblem contiguous = step();
  contiguous.page_size = 0;
  PrefillProblem padded = step();
  padded.varlen = false;
  for (const PrefillProblem& p : {contiguous, padded}) {
    Plan plan;
    ASSERT_TRUE(plan_prefill(p, DeviceInfo::h200(), mixed(), &plan).ok());
    EXPECT_FALSE(plan.mixed_route()) << describe(plan);
    EXPECT_EQ(plan.note().find("mixed route"), std::string::npos) << plan.note();
  }
  // A serving step the route cannot serve says why.
  DeviceInfo a100 = DeviceInfo::h200();
  a100.cc_major = 8;
  Plan plan;
  ASSERT_TRUE(plan_prefill(step(), a100, mixed(), &plan).ok());
  EXPECT_FALSE(plan.mixed_route()) << describe(plan);
  EXPECT_NE(plan.note().find("mixed route not taken: it runs on sm_90"), std::string::npos) << plan.note();
}

// The route is taken exactly where this build holds the decode parts' instances: a build without
// them (here: whichever head dims and formats it lacks) plans the one call and says why, rather
// than a route whose launch would fail.
TEST(MixedRoute, TakenOnlyWhereTheBuildHoldsItsDecodeParts) {
  auto compiled = [](const Plan& plan) {
    for (const KernelFamilyInfo& f : kernel_families()) {
      if (f.name != plan.family()) continue;
      for (const KernelFamilyInfo::Compiled& c : f.compiled) {
        const bool format = c.kv_format == KvFormat::kNative || c.kv_format == plan.decode().kv_format;
        if (c.dtype == plan.decode().dtype && c.head_dim == plan.decode().head_dim && format) return true;
      }
    }
    return false;
  };
  int taken = 0, refused = 0;
  for (int head_dim : {64, 128, 256}) {
    for (KvFormat format : {KvFormat::kNative, KvFormat::kInt4}) {
      PrefillProblem p = step();
      p.head_dim = head_dim;
      p.kv_format = format;
      Plan routed;
      ASSERT_TRUE(plan_prefill(p, DeviceInfo::h200(), mixed(), &routed).ok());
      bool parts_compiled = true;
      for (int q_len : {1, 4}) {  // the single-query part and the 2-4 query part (a group of 4)
        DecodeProblem rows;
        rows.batch = p.batch, rows.num_q_heads = p.num_q_heads, rows.num_kv_heads = p.num_kv_heads;
        rows.head_dim = head_dim, rows.q_len = q_len, rows.max_kv_len = p.max_kv_len;
        rows.page_size = p.page_size, rows.causal = true, rows.dtype = p.dtype, rows.kv_format = format;
        PlanOptions o;
        o.tuning.prefill_route = false;
        Plan part;
        parts_compiled = parts_compiled && plan_decode(rows, DeviceInfo::h200(), o, &part).ok() &&
                         !part.decode_via_prefill() && compiled(part);
      }
      const std::string what = "D=" + std::to_string(head_dim) + " " + to_string(format) + ": " + routed.note();
      EXPECT_EQ(routed.mixed_route(), parts_compiled) << what;
      if (!routed.mixed_route()) {
        EXPECT_NE(routed.note().find("mixed route not taken"), std::string::npos) << what;
      }
      (routed.mixed_route() ? taken : refused) += 1;
    }
  }
  EXPECT_EQ(taken + refused, 6);
}

TEST(MixedRoute, AGroupOf16LeavesOnlyTheSingleQueryPart) {
  PrefillProblem p = step();
  p.num_q_heads = 64, p.num_kv_heads = 4;
  Plan routed;
  ASSERT_TRUE(plan_prefill(p, DeviceInfo::h200(), mixed(), &routed).ok());
  if (!routed.mixed_route()) GTEST_SKIP() << "this build lacks the decode part's family: " << describe(routed);
  EXPECT_EQ(routed.mixed_decode_q(), 1);
  EXPECT_EQ(routed.mixed_spec_plan(), nullptr);
  EXPECT_EQ(routed.mixed_spec_offset(), routed.mixed_scratch_offset());
  const plan::MixedScratch sc = plan::mixed_scratch(256, 1, 64, 128, 2048);
  EXPECT_EQ(sc.parts[1].width, 0);
  EXPECT_EQ(routed.workspace_bytes(), routed.mixed_scratch_offset() + sc.total_bytes);
}

TEST(MixedRoute, TheScratchPartsDoNotOverlap) {
  EXPECT_EQ(detail::block_table_pages(32768, 16), 2048);
  EXPECT_EQ(detail::block_table_pages(33, 16), 3);
  EXPECT_EQ(detail::block_table_pages(0, 16), 1);
  const plan::MixedScratch sc = plan::mixed_scratch(5, 4, 3, 64, 7);
  const plan::MixedScratchPart& a = sc.parts[0];
  const plan::MixedScratchPart& b = sc.parts[1];
  EXPECT_EQ(a.width, 1);
  EXPECT_EQ(b.width, 4);
  EXPECT_GE(a.out_offset, a.q_offset + 5 * 1 * 3 * 64 * 2);
  EXPECT_GE(a.lse_offset, a.out_offset + 5 * 1 * 3 * 64 * 2);
  EXPECT_GE(a.lens_offset, a.lse_offset + 5 * 1 * 3 * 4);
  EXPECT_GE(a.table_offset, a.lens_offset + 5 * 4);
  EXPECT_GE(b.q_offset, a.table_offset + 5 * 7 * 4);
  EXPECT_GE(b.out_offset, b.q_offset + 5 * 4 * 3 * 64 * 2);
  EXPECT_GE(b.lse_offset, b.out_offset + 5 * 4 * 3 * 64 * 2);
  EXPECT_GE(b.lens_offset, b.lse_offset + 5 * 4 * 3 * 4);
  EXPECT_GE(b.table_offset, b.lens_offset + 5 * 4);
  EXPECT_GE(sc.slots_offset, b.table_offset + 5 * 7 * 4);
  EXPECT_GE(sc.prefill_lens_offset, sc.slots_offset + 5 * 4);
  EXPECT_GE(sc.prefill_skip_offset, sc.prefill_lens_offset + 5 * 4);
  EXPECT_GE(sc.total_bytes, sc.prefill_skip_offset + 5 * 4);
}

// The route's parameters over eight sequences of 17 query tokens in all, lengths up to 1000:
// single-query rows in part 0, rows of 2-4 queries in part 1.
detail::MixedRouteParams eight_sequences(const std::vector<int32_t>& cu, const std::vector<int32_t>& lens) {
  detail::MixedRouteParams p;
  p.cu_seqlens_q = cu.data();
  p.seq_lens = lens.data();
  p.batch = 8, p.total_q = 17, p.max_kv_len = 1000;
  p.parts[0].q_min = 1, p.parts[0].q_max = 1;
  p.parts[1].q_min = 2, p.parts[1].q_max = 4;
  return p;
}

TEST(MixedRoute, DecodeRowsAreShortSequencesWithValidLengthsInTheirPart) {
  //                        q:  1  4  5  0  2  3   1   1
  const std::vector<int32_t> cu = {0, 1, 5, 10, 10, 12, 15, 16, 17};
  const std::vector<int32_t> lens = {9, 4, 50, 7, 1, 3, 2000, -1};
  detail::MixedRouteParams p = eight_sequences(cu, lens);
  const int expected[] = {0, 1, -1, -1, -1, 1, -1, -1};
  for (int b = 0; b < 8; ++b) EXPECT_EQ(detail::mixed_decode_part(p, b), expected[b]) << "sequence " << b;
  p.total_q = 16;  // the last sequence's query lies past the q tensor
  EXPECT_EQ(detail::mixed_decode_part(p, 7), -1);
  // Without the second part, rows of 2-4 queries stay with the prefill part.
  p.parts[1].q_max = 0;
  EXPECT_EQ(detail::mixed_decode_part(p, 1), -1);
  EXPECT_EQ(detail::mixed_decode_part(p, 0), 0);
}

// A part's members take its first slots in sequence order (the decode kernels' first blocks are
// the real ones); counting in strides (as the split kernel's threads do) adds up to the same.
TEST(MixedRoute, MembersTakeTheirPartsFirstSlotsInOrder) {
  //                        q:  1  4  5  0  2  1   3   1
  const std::vector<int32_t> cu = {0, 1, 5, 10, 10, 12, 13, 16, 17};
  const std::vector<int32_t> lens = {9, 4, 50, 7, 2, 3, 2000, 5};
  const detail::MixedRouteParams p = eight_sequences(cu, lens);
  // Part 0: sequences 0, 5, 7; part 1: 1, 4; the rest (a chunk, an empty row, a bad length) prefill.
  const int part[] = {0, 1, -1, -1, 1, 0, -1, 0};
  const int slot[] = {0, 0, -1, -1, 1, 1, -1, 2};
  for (int b = 0; b < 8; ++b) {
    ASSERT_EQ(detail::mixed_decode_part(p, b), part[b]) << "sequence " << b;
    const detail::MixedMemberCount one = detail::mixed_member_count(p, b, 0, 1);
    EXPECT_EQ(one.total[0], 3);
    EXPECT_EQ(one.total[1], 2);
    if (part[b] >= 0) EXPECT_EQ(one.before[part[b]], slot[b]) << "sequence " << b;
    for (int stride : {2, 3, 256}) {
      detail::MixedMemberCount sum;
      for (int first = 0; first < stride; ++first) {
        const detail::MixedMemberCount c = detail::mixed_member_count(p, b, first, stride);
        for (int k = 0; k < detail::kMixedDecodeParts; ++k) sum.before[k] += c.before[k], sum.total[k] += c.total[k];
      }
      for (int k = 0; k < detail::kMixedDecodeParts; ++k) {
        EXPECT_EQ(sum.before[k], one.before[k]) << "sequence " << b << " stride " << stride;
        EXPECT_EQ(sum.total[k], one.total[k]) << "sequence " << b << " stride " << stride;
      }
    }
  }
}

}  // namespace
}  // namespace splitkv
