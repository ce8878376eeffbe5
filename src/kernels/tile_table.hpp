// The one table of tile shapes, read by the kernels' traits (device) and, through the tile
// summaries the kernel registry names, by the planner (host): heuristics and kernels can never
// disagree about block sizes or shared-memory use.
#pragma once

#include "common/formats.hpp"
#include "common/host_device.hpp"
#include "splitkv/types.hpp"

namespace splitkv::tiles {

// What the planner needs to know about a family's tile at one head dim and KV format.
struct TileSummary {
  int block_m;     // query rows per thread block
  int block_n;     // keys per main-loop step of a block (the granularity of KV splits)
  int warps;
  int stages;      // pipeline depth (0: no pipeline)
  int smem_bytes;  // dynamic shared memory per block
  // One block per SM walks the grid's tiles (prefill_sm90 with two Q buffers: the next tile's Q and
  // first K/V tiles load while the current tile finishes); the grid is then a tile list.
  bool persistent = false;
  constexpr int threads() const { return warps * 32; }
};

// Every family so far computes on 16-bit Q, K, V and O.
constexpr int k16BitBytes = 2;

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

  constexpr int threads() const { return warps * 32; }
  constexpr int block_keys() const { return warp_keys * warps; }
  constexpr int q_smem_bytes() const { return block_m * head_dim * k16BitBytes; }
  constexpr int pipeline_smem_bytes() const {
    return warps * stages * 2 * warp_keys * head_dim * kv_bytes;  // K and V
  }
  // Epilogue: each warp's fp32 accumulator plus its row max and row sum, then the inbox of the
  // cluster merge.
  constexpr int merge_smem_bytes() const {
    return warps * block_m * head_dim * 4 + 2 * warps * block_m * 4 + cluster_inbox_bytes(block_m, head_dim);
  }
  constexpr int smem_bytes() const {
    return q_smem_bytes() + (pipeline_smem_bytes() > merge_smem_bytes() ? pipeline_smem_bytes()
                                                                        : merge_smem_bytes());
  }
};

// block_m 16 (decode_mma) or 32 (decode_mma_m32: a KV head with more than 16 packed rows, e.g.
// speculative queries x a large GQA group, is read by half as many tiles).
constexpr DecodeTile decode_tile(int head_dim, int block_m = 16) {
  // Stages: enough bytes in flight per SM to cover HBM latency, few enough that two blocks fit.
  return DecodeTile{head_dim, block_m, 16, 4, head_dim <= 64 ? 4 : 3, k16BitBytes};
}

constexpr TileSummary decode_summary(const DecodeTile& t) {
  return TileSummary{t.block_m, t.block_keys(), t.warps, t.stages, t.smem_bytes()};
}
constexpr TileSummary decode_mma_summary(int head_dim, KvFormat) { return decode_summary(decode_tile(head_dim)); }
constexpr TileSummary decode_mma_m32_summary(int head_dim, KvFormat) { return decode_summary(decode_tile(head_dim, 32)); }

// ---- decode over a quantized KV cache (family decode_quant) ----------------------------------------
// The decode_mma block (16 packed rows, 4 warps, 16-key sub-tiles per warp) reading K and V as
// codes: each sub-tile lands in shared memory as it is stored (codes plus, for INT8/INT4, the
// per-token (scale, min) pairs) and is dequantized in registers. The pipeline depth counts bytes: a
// warp keeps about as many bytes in flight as decode_mma does, so an INT4 sub-tile, a quarter of
// the bytes of a bf16 one, gets about four times the stages. Dequantizing makes blocks latency
// bound long before the memory is; INT4 (the most instructions per byte) at D <= 128 is sized for
// three resident blocks per SM instead (a 16 KB ring per warp, registers capped for three blocks),
// which measured faster for INT4 and slower for the 8-bit formats. Too many bytes in flight cost
// bandwidth too: the 8-bit formats at D=128 keep the two resident blocks their byte-counted ring
// sets, but only three of its stages in flight (docs/TUNING.md, "Kernels").
struct KvCodeBits {
  int k_bits;           // 8 (fp8, int8) or 4 (int4)
  int v_bits;
  bool token_scales;    // fp16 (scale, min) per token (int8, int4, k8v4); fp8 has one scale per head
};

constexpr KvCodeBits kv_code_bits(KvFormat format) {
  switch (detail::base_kv_format(format)) {  // a *_kc format's codes are its base's
    case KvFormat::kFP8E4M3: return {8, 8, false};
    case KvFormat::kInt8: return {8, 8, true};
    case KvFormat::kInt4: return {4, 4, true};
    case KvFormat::kK8V4: return {8, 4, true};
    default: return {16, 16, false};
  }
}

struct DecodeQuantTile {
  DecodeTile base;  // rows, keys per warp sub-tile, warps (shared with decode_mma)
  KvCodeBits bits;
  int stages;             // sub-tiles in flight per warp: the ring's depth
  int min_blocks_per_sm;  // the kernel's register bound (__launch_bounds__)
  int reserved_stages;    // shared memory per warp, in stages (>= stages): sets the resident blocks per SM

  constexpr int k_row_bytes() const { return base.head_dim * bits.k_bits / 8; }
  constexpr int v_row_bytes() const { return base.head_dim * bits.v_bits / 8; }
  // One warp sub-tile: K codes, V codes, then 4-byte (scale, min) pairs of its keys for K and V.
  constexpr int scale_bytes() const { return bits.token_scales ? base.warp_keys * 4 : 0; }
  constexpr int stage_bytes() const {
    return base.warp_keys * (k_row_bytes() + v_row_bytes()) + 2 * scale_bytes();
  }
  constexpr int pipeline_smem_bytes() const { return base.warps * reserved_stages * stage_bytes(); }
  constexpr int smem_bytes() const {
    return base.q_smem_bytes() + (pipeline_smem_bytes() > base.merge_smem_bytes() ? pipeline_smem_bytes()
                                                                                  : base.merge_smem_bytes());
  }
};

constexpr DecodeQuantTile decode_quant_tile(int head_dim, KvFormat format) {
  const DecodeTile base = decode_tile(head_dim);
  const KvCodeBits bits = kv_code_bits(format);
  const bool three_blocks = head_dim <= 128 && bits.k_bits == 4 && bits.v_bits == 4;
  DecodeQuantTile t{base, bits, 2, three_blocks ? 3 : 1, 2};
  const int ring_bytes = three_blocks ? 16 * 1024 : base.stages * 2 * base.warp_keys * head_dim * k16BitBytes;
  const int stages = (ring_bytes + (three_blocks ? 0 : t.stage_bytes() / 2)) / t.stage_bytes();
  t.stages = stages < 2 ? 2 : (stages > 12 ? 12 : stages);
  t.reserved_stages = t.stages;
  // FP8, INT8 and K8V4 at D=128: two resident blocks (a ring of 6-7 stages' memory) with 3 stages in
  // flight, ~100 KB per SM; fewer stages and more resident blocks measured slower (docs/TUNING.md, "Kernels").
  if (head_dim == 128 && bits.k_bits == 8) t.stages = 3;
  // INT4 at D=128: 5 of the 7 reserved stages in flight (three resident blocks unchanged)
  // (docs/TUNING.md, "Kernels").
  if (head_dim == 128 && three_blocks) t.stages = 5;
  return t;
}

constexpr TileSummary decode_quant_summary(int head_dim, KvFormat format) {
  const DecodeQuantTile t = decode_quant_tile(head_dim, format);
  return TileSummary{t.base.block_m, t.base.block_keys(), t.base.warps, t.stages, t.smem_bytes()};
}
// decode_quant_n8: the same block and ring with 8 packed rows (keys as the MMA's rows). Also
// decode_mma_n8's (the same kernel over a 16-bit cache): KvFormat::kNative has 16-bit rows, whose
// byte-counted ring comes out at decode_mma's depth (4 stages at D=64, 3 at D=128 and 256).
constexpr TileSummary decode_quant_n8_summary(int head_dim, KvFormat format) {
  TileSummary s = decode_quant_summary(head_dim, format);
  s.block_m = 8;
  return s;
}

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

// ---- combine --------------------------------------------------------------------------------
// Blocks of 128 threads; head_dim / 4 threads merge one output row (a float4 of columns each), so
// a block merges 512 / head_dim rows. A row of more than one chunk of 8 splits (kMergeChunk,
// combine_state.cuh) gets a block of its own with `groups` such teams, one chunk each: groups is
// the chunk count rounded up to a power of two, at most 256 threads (8 teams at head_dim 128), so
// up to 64 splits cost one load latency, not eight, and the rows spread over as many SMs.
constexpr int kCombineThreads = 128;
constexpr int kCombineTeamsMaxThreads = 256;
constexpr int kCombineChunk = 8;
constexpr int combine_rows_per_block(int head_dim) { return kCombineThreads / (head_dim / 4); }
constexpr int combine_max_split_groups(int head_dim) { return kCombineTeamsMaxThreads / (head_dim / 4); }
constexpr int combine_chunks(int num_splits) { return (num_splits + kCombineChunk - 1) / kCombineChunk; }
constexpr int combine_split_groups(int num_splits, int head_dim) {
  const int chunks = combine_chunks(num_splits);
  int groups = 1;
  while (groups < chunks && groups < combine_max_split_groups(head_dim)) groups *= 2;
  return groups;
}
constexpr TileSummary combine_summary(int, KvFormat) { return TileSummary{1, 0, kCombineThreads / 32, 0, 0}; }

}  // namespace splitkv::tiles
