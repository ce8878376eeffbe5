// prefill_sm90's tile shapes (read by its traits and, through its summaries, by the planner).
#pragma once

#include "kernels/common/tile_summary.hpp"

namespace splitkv::tiles {

// ---- prefill on sm_90a (family prefill_sm90) ------------------------------------------------------
// One thread block: a producer warpgroup issues TMA loads of Q (once) and of K and V (a ring of
// `stages` tiles each); `consumer_warpgroups` warpgroups of 64 query rows each compute S = Q K^T
// and O += P V with wgmma, the softmax in registers between the two.
struct PrefillSm90Tile {
  int head_dim;
  int block_m;  // query rows per block: 64 per consumer warpgroup
  int block_n;  // keys per K tile: per main-loop step
  int stages;   // depth of the one ring that K and V share (K_t, V_t, K_t+1, ...), in stages of stage_elems()
  int consumer_warpgroups;
  // 2: a persistent block, the next tile's Q loads into the other buffer while the consumers finish
  // the current tile; 1: one tile per block (the next Q could only load after the epilogue, which
  // stages O through the Q buffer).
  int q_buffers;
  // Keys per V tile; 0: block_n. A K tile of block_n keys and V tiles of fewer (prefill_sm90_v64, the
  // original design's independent K and V tile shapes) share one ring of stages of one V tile each:
  // the K tile then arrives in as many column slices (block_n keys x head_dim * v_block_n / block_n).
  int v_block_n = 0;

  constexpr int v_keys() const { return v_block_n > 0 ? v_block_n : block_n; }
  constexpr int v_tiles_per_step() const { return block_n / v_keys(); }
  constexpr int stage_elems() const { return v_keys() * head_dim; }
  constexpr int threads() const { return 128 * (1 + consumer_warpgroups); }
  // Blocks the kernel is built to keep resident per SM (its launch bounds and register split): a
  // one-consumer tile is small enough for two, so two consumers still share an SM's tensor cores.
  constexpr int blocks_per_sm() const { return consumer_warpgroups == 1 ? 2 : 1; }
  constexpr bool persistent() const { return q_buffers == 2; }
  // Q buffers, the K/V ring, the barriers, tile ids and the consumers' wait-order words (padded to
  // 2 KB) and 1 KB to align the swizzled tiles.
  constexpr int smem_bytes() const {
    return (q_buffers * block_m * head_dim + stages * stage_elems()) * k16BitBytes + 2048 + 1024;
  }
};

// A K or V tile is consumed about once per product, and every block of a head re-reads the same
// tiles from L2: a ring 2.5 tiles deep per kind keeps loads far enough ahead (as deep as shared
// memory allows next to Q: 5 x 32 KB at D=128, 4 x 32 KB at D=256, 8 x 16 KB at D=64). At D <= 128
// two Q buffers fit next to that ring (D=128: 2 x 32 + 5 x 32 KB + 3 KB is exactly the 227 KB a
// block may have), so those tiles are persistent; D=256 keeps one Q buffer and one tile per block.
// The family's tile shapes; each is its own registered family (kernel_families.cmake).
enum class PrefillSm90Variant {
  kDefault,  // prefill_sm90: two consumer warpgroups, 128 x 128 tiles (128 x 64 at D=256)
  kM192,     // prefill_sm90_m192 (D=64): three consumers, 192 query rows, FlashAttention-3's D=64 tile
  kN80,      // prefill_sm90_n80 (D=256): 80-key tiles, FlashAttention-3's D=256 tile
  kTwoPass,  // prefill_sm90_twopass: the default tile run as the two-pass strategy (statistics, then output)
  kPackGqa,  // prefill_sm90_gqa: the default tile holding the query heads of one KV head (GQA packing)
  kV64,      // prefill_sm90_v64 (D=128): 128-key K tiles, 64-key V tiles (independent K and V tile shapes)
  kGqa64,    // prefill_sm90_gqa64 (D=128): one consumer, 64 packed rows x 64 keys, two blocks per SM
};
// Why kGqa64: speculative decoding and short chunks pack a KV head's q_len x group rows (28/4 heads,
// q_len 8: 56) into a tile; the 128-row packed tile pads them to 128 and runs every product on the
// padding (docs/TUNING.md, "Kernels"). A
// 64-row tile wastes 12% there, and two of its blocks per SM, each a producer and one consumer
// warpgroup on its own KV split, keep the tensor cores fed as the default's two consumers do.

// GQA packing (prefill_sm90_gqa): a tile of block_m rows holds the `group` query heads of one KV
// head, each with the same run of queries, head-major: row r is query q0 + r % m of head
// kv_head * group + r / m. m is block_m / group rounded down to whole 8-row swizzle atoms (Q arrives
// in 8-row TMA boxes, each from one head), so a group of at most block_m / 8 heads packs; 0 if not.
constexpr int packed_queries_per_head(int block_m, int group) {
  return group >= 1 && group <= block_m / 8 ? block_m / group / 8 * 8 : 0;
}

constexpr PrefillSm90Tile prefill_sm90_tile(int head_dim, PrefillSm90Variant variant = PrefillSm90Variant::kDefault) {
  // Registers per consumer thread: S (64 x block_n) and O (64 x D) accumulators in fp32.
  switch (variant) {
    case PrefillSm90Variant::kM192:
      return PrefillSm90Tile{head_dim, 192, 128, 8, 3, 2};
    case PrefillSm90Variant::kN80:  // 4 stages of 40 KB next to a 64 KB Q: the whole 227 KB
      return PrefillSm90Tile{head_dim, 128, 80, 4, 2, 1};
    case PrefillSm90Variant::kV64:  // the default's ring memory in 10 stages of 16 KB (D=128)
      return PrefillSm90Tile{head_dim, 128, 128, 10, 2, 2, 64};
    case PrefillSm90Variant::kGqa64:  // 16 KB of Q and 5 stages of 16 KB: two blocks in an SM's 228 KB
      return PrefillSm90Tile{head_dim, 64, 64, 5, 1, 1};
    default: {  // kDefault, kPackGqa and kTwoPass (whose passes each run one tile per block)
      const bool two_q_buffers = head_dim <= 128 && variant != PrefillSm90Variant::kTwoPass;
      return PrefillSm90Tile{head_dim, 128, head_dim <= 128 ? 128 : 64, head_dim <= 64 ? 8 : head_dim <= 128 ? 5 : 4,
                             2, two_q_buffers ? 2 : 1};
    }
  }
}

constexpr TileSummary prefill_sm90_summary(const PrefillSm90Tile& t) {
  return TileSummary{t.block_m, t.block_n, t.threads() / 32, t.stages, t.smem_bytes(), t.persistent()};
}
constexpr TileSummary prefill_sm90_summary(int head_dim, KvFormat) {
  return prefill_sm90_summary(prefill_sm90_tile(head_dim));
}
constexpr TileSummary prefill_sm90_m192_summary(int head_dim, KvFormat) {
  return prefill_sm90_summary(prefill_sm90_tile(head_dim, PrefillSm90Variant::kM192));
}
constexpr TileSummary prefill_sm90_n80_summary(int head_dim, KvFormat) {
  return prefill_sm90_summary(prefill_sm90_tile(head_dim, PrefillSm90Variant::kN80));
}
constexpr TileSummary prefill_sm90_twopass_summary(int head_dim, KvFormat) {
  return prefill_sm90_summary(prefill_sm90_tile(head_dim, PrefillSm90Variant::kTwoPass));
}
constexpr TileSummary prefill_sm90_gqa_summary(int head_dim, KvFormat) {
  return prefill_sm90_summary(prefill_sm90_tile(head_dim, PrefillSm90Variant::kPackGqa));
}
constexpr TileSummary prefill_sm90_v64_summary(int head_dim, KvFormat) {
  return prefill_sm90_summary(prefill_sm90_tile(head_dim, PrefillSm90Variant::kV64));
}
constexpr TileSummary prefill_sm90_gqa64_summary(int head_dim, KvFormat) {
  return prefill_sm90_summary(prefill_sm90_tile(head_dim, PrefillSm90Variant::kGqa64));
}

}  // namespace splitkv::tiles
