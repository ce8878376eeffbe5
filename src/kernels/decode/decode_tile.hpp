// decode_mma's tile shapes (read by its traits and, through its summaries, by the planner).
#pragma once

#include "kernels/common/tile_summary.hpp"

namespace splitkv::tiles {

// ---- decode (family decode_mma) ----------------------------------------------------------------
// The most splits a cluster plan merges (one rank per split), and the shared memory each rank's
// inbox of the cluster merge takes (kernels/decode/cluster_combine.cuh): every rank's partial of
// the 4-column chunks it owns, ceil(chunks / ranks) of them, plus every rank's row LSEs.
constexpr int kMaxClusterRanks = 16;
constexpr int cluster_inbox_bytes(int block_m, int head_dim) {
  return block_m * (head_dim / 4 + kMaxClusterRanks - 1) * 16 + kMaxClusterRanks * block_m * 4;
}

// One thread block serves one (sequence, KV head, 16-row query tile, KV split). Its rows are the
// q_len x (Hq/Hkv) query rows sharing the KV head (GQA packing). Each warp streams its own
// 16-key sub-tiles through a private cp.async pipeline; warps take sub-tiles round-robin and
// merge their softmax states once at the end.
struct DecodeTile {
  int head_dim;
  int block_m;    // query rows per block (one MMA M)
  int warp_keys;  // keys per warp sub-tile
  int warps;
  int stages;     // sub-tiles in flight per warp
  int kv_bytes;   // bytes per K/V element
  // Shared memory for the cluster merge's inbox; false only in the short-block twin bound for
  // one-split plans (decode_short_twin_bound_blocks), which never merge in a cluster.
  bool cluster_inbox = true;

  constexpr int threads() const { return warps * 32; }
  constexpr int block_keys() const { return warp_keys * warps; }
  constexpr int q_smem_bytes() const { return block_m * head_dim * k16BitBytes; }
  constexpr int pipeline_smem_bytes() const {
    return warps * stages * 2 * warp_keys * head_dim * kv_bytes;  // K and V
  }
  // Epilogue: each warp's fp32 accumulator plus its row max and row sum, then the inbox of the
  // cluster merge.
  constexpr int merge_smem_bytes() const {
    return warps * block_m * head_dim * 4 + 2 * warps * block_m * 4 +
           (cluster_inbox ? cluster_inbox_bytes(block_m, head_dim) : 0);
  }
  constexpr int smem_bytes() const {
    return q_smem_bytes() + (pipeline_smem_bytes() > merge_smem_bytes() ? pipeline_smem_bytes()
                                                                        : merge_smem_bytes());
  }
};

// block_m 16 (decode_mma) or 32 (decode_mma_m32: a KV head with more than 16 packed rows, e.g.
// speculative queries x a large GQA group, is read by half as many tiles). Four warps; two in the
// short-block twin below.
constexpr DecodeTile decode_tile(int head_dim, int block_m = 16, int warps = 4, bool cluster_inbox = true) {
  // Stages: enough bytes in flight per SM to cover HBM latency, few enough that two blocks fit.
  return DecodeTile{head_dim, block_m, 16, warps, head_dim <= 64 ? 4 : 3, k16BitBytes, cluster_inbox};
}

// Resident blocks per SM by registers where fewer than shared memory allows on sm_90
// (TileSummary::register_blocks): the 32-row tile's uncapped variants instance at D=64 holds two
// (196 registers, where its 69632 B allow three). Its twin register-bound for three blocks (168
// registers, a few spilled values) is compiled beside it (docs/TUNING.md, "Kernels").
constexpr TileSummary::RegisterBlocks decode_register_blocks(const DecodeTile& t) {
  return t.block_m == 32 && t.head_dim <= 64 && t.warps == 4 ? TileSummary::RegisterBlocks{0, 2, 0}
                                                             : TileSummary::RegisterBlocks{};
}
constexpr int decode_bound_variants_blocks(const DecodeTile& t) {
  return decode_register_blocks(t).variants > 0 ? 3 : 0;
}

// The uncapped variants instance's twin for short blocks (TileSummary::ShortTwin): the same tile
// with two warps, for the 32-row tile at D=64. A block of a short sliding window reads a few
// 64-key steps and is bound by its latency; two warps halve its shared memory (38912 B against
// 69632), so an SM holds five blocks (five by registers too: 196 x 64 threads) instead of the
// four-warp instance's two or its register-bound twin's three; the plan takes it where the grid
// then runs in fewer rounds. Over long rows, or in the same rounds, the four-warp instance reads
// faster (docs/TUNING.md, "Kernels").
constexpr int decode_short_twin_warps(const DecodeTile& t) {
  return t.block_m == 32 && t.head_dim <= 64 && t.warps == 4 ? 2 : 0;
}
inline constexpr int kDecodeShortTwinRegisterBlocks = 5;

// The stream kernel (kernels/decode/decode_stream_kernel.cuh, PlanTuning::decode_stream): one-warp
// blocks, each with its Q tile and a four-stage K/V ring, at D=64. The 32-row tile's (20480 B):
// ten per SM by shared memory (with the 1 KB each block reserves; 168 registers would hold
// twelve). The 16-row tile's (18432 B): twelve per SM by shared memory, compiled register-bound
// for twelve (decode_stream_launch_bound). 0: the tile has no stream kernel.
constexpr int decode_stream_blocks_per_sm(const DecodeTile& t) {
  if (t.head_dim > 64 || t.warps != 4) return 0;
  return t.block_m == 32 ? 10 : t.block_m == 16 ? 12 : 0;
}
// The stream kernel's __launch_bounds__ minimum of blocks per SM: the 32-row kernel's registers
// (198) hold its ten without a bound; the 16-row kernel is bound for its twelve (168 registers).
constexpr int decode_stream_launch_bound(const DecodeTile& t) {
  return t.block_m == 16 ? decode_stream_blocks_per_sm(t) : 0;
}
// The same twin for one-split plans, which never merge in a cluster: without the cluster merge's
// inbox (36864 B against 38912) six blocks fit an SM's shared memory, and it is compiled
// register-bound for six (168 registers against 196). The plan takes it where six blocks run the
// grid in fewer rounds than five.
constexpr int decode_short_twin_bound_blocks(const DecodeTile& t) {
  return decode_short_twin_warps(t) > 0 ? 6 : 0;
}

constexpr TileSummary decode_summary(const DecodeTile& t) {
  TileSummary s{t.block_m, t.block_keys(), t.warps, t.stages, t.smem_bytes()};
  s.register_blocks = s.fp16_register_blocks = decode_register_blocks(t);
  s.bound_variants_blocks = decode_bound_variants_blocks(t);
  s.stream_blocks = decode_stream_blocks_per_sm(t);
  if (const int warps = decode_short_twin_warps(t); warps > 0) {
    const DecodeTile twin = decode_tile(t.head_dim, t.block_m, warps);
    s.short_twin = TileSummary::ShortTwin{warps, twin.smem_bytes(), kDecodeShortTwinRegisterBlocks, twin.stages};
    if (const int bound = decode_short_twin_bound_blocks(t); bound > 0) {
      s.short_twin.bound_blocks = bound;
      s.short_twin.bound_smem_bytes = decode_tile(t.head_dim, t.block_m, warps, false).smem_bytes();
    }
  }
  return s;
}
constexpr TileSummary decode_mma_summary(int head_dim, KvFormat) { return decode_summary(decode_tile(head_dim)); }
constexpr TileSummary decode_mma_m32_summary(int head_dim, KvFormat) { return decode_summary(decode_tile(head_dim, 32)); }

}  // namespace splitkv::tiles
