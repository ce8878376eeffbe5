// prefill_mma's tile shapes (read by its traits and, through its summaries, by the planner).
#pragma once

#include "kernels/common/tile_summary.hpp"

namespace splitkv::tiles {

// ---- prefill (families prefill_mma*) ------------------------------------------------------------
// One thread block serves one (query block, query head, sequence[, KV split]); warps own query
// rows (except split-V, where warps own head-dim columns of O). Per main-loop step the block
// consumes block_n keys; K arrives in sub-tiles of k_sub_keys keys and V in column slices of
// v_sub_cols, each its own cp.async group consumed as soon as it lands, so the K and V tile shapes
// are independent. K of step j+1 loads while V of step j is used, and vice versa: two stages.
enum class PrefillVariant {
  kDefault,  // FlashAttention-2's schedule: one K tile and one V tile per step
  kK16V64,   // K in 16-key sub-tiles, V in 64-column slices (independent K and V tile shapes)
  kSplitV,   // warps own head-dim columns of O and each computes the whole score tile
  kTwoPass,  // a row-statistics pass, then a softmax * V pass
};

struct PrefillTile {
  int head_dim;
  int block_m;     // query rows per block
  int block_n;     // keys per main-loop step
  int warps;
  int k_sub_keys;  // keys per K sub-tile (divides block_n)
  int v_sub_cols;  // head-dim columns per V slice (divides head_dim)

  constexpr int threads() const { return warps * 32; }
  // Q, one K tile and one V tile.
  constexpr int smem_bytes() const { return (block_m + 2 * block_n) * head_dim * k16BitBytes; }
};

constexpr PrefillTile prefill_tile(int head_dim, PrefillVariant variant) {
  const int block_n = head_dim <= 64 ? 128 : 64;
  switch (variant) {
    case PrefillVariant::kSplitV:  // every warp holds whole score rows: keep the block short
      return PrefillTile{head_dim, 32, 64, 4, 64, head_dim};
    case PrefillVariant::kK16V64:
      return PrefillTile{head_dim, 128, 64, 4, 16, 64};
    case PrefillVariant::kDefault:
    case PrefillVariant::kTwoPass:
      break;
  }
  return PrefillTile{head_dim, 128, block_n, 4, block_n, head_dim};
}

constexpr TileSummary prefill_summary(int head_dim, PrefillVariant variant) {
  const PrefillTile t = prefill_tile(head_dim, variant);
  return TileSummary{t.block_m, t.block_n, t.warps, 2, t.smem_bytes()};
}
constexpr TileSummary prefill_mma_summary(int head_dim, KvFormat) { return prefill_summary(head_dim, PrefillVariant::kDefault); }
constexpr TileSummary prefill_mma_k16v64_summary(int head_dim, KvFormat) {
  return prefill_summary(head_dim, PrefillVariant::kK16V64);
}
constexpr TileSummary prefill_mma_splitv_summary(int head_dim, KvFormat) {
  return prefill_summary(head_dim, PrefillVariant::kSplitV);
}
constexpr TileSummary prefill_mma_twopass_summary(int head_dim, KvFormat) {
  return prefill_summary(head_dim, PrefillVariant::kTwoPass);
}

}  // namespace splitkv::tiles
