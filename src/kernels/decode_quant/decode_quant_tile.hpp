// decode_quant's tile shapes: decode_mma's block over codes (read by its traits and, through its
// summaries, by the planner).
#pragma once

#include "kernels/common/tile_summary.hpp"
#include "kernels/decode/decode_tile.hpp"

namespace splitkv::tiles {

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
// sets, but only three of its stages in flight. FP8's 8-row block (the keys-as-rows kernel) at D=64
// holds four resident blocks with four stages in flight; its 16-row block measured slower so
// (docs/TUNING.md, "Kernels").
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
  // Keys per channel (*_kc): each warp's slots for the fp16 (scale[D], min[D]) of the key groups its
  // sub-tiles in flight cover (a warp takes its sub-tiles in runs of one 64-key group).
  int group_bytes = 0;  // per slot: 4 * head_dim
  int group_slots = 0;

  constexpr int k_row_bytes() const { return base.head_dim * bits.k_bits / 8; }
  constexpr int v_row_bytes() const { return base.head_dim * bits.v_bits / 8; }
  // One warp sub-tile: K codes, V codes, then 4-byte (scale, min) pairs of its keys for K and V.
  constexpr int scale_bytes() const { return bits.token_scales ? base.warp_keys * 4 : 0; }
  constexpr int stage_bytes() const {
    return base.warp_keys * (k_row_bytes() + v_row_bytes()) + 2 * scale_bytes();
  }
  constexpr int pipeline_smem_bytes() const {
    return base.warps * (reserved_stages * stage_bytes() + group_slots * group_bytes);
  }
  constexpr int smem_bytes() const {
    return base.q_smem_bytes() + (pipeline_smem_bytes() > base.merge_smem_bytes() ? pipeline_smem_bytes()
                                                                                  : base.merge_smem_bytes());
  }
};

// Twins with two warps for the uncapped variants instance (TileSummary::ShortTwin), for blocks of
// a short sliding window (docs/TUNING.md, "Kernels"): FP8's 16-row block at D=64, eight resident
// blocks (a 6-stage ring per warp, registers bound for eight), 4 stages in flight; and the 8-row
// block over a 16-bit cache at D=64 (decode_mma_n8), six resident blocks (its 4-stage ring, 34 KB
// against the four-warp block's 66 KB; registers bound for six).
constexpr int decode_quant_short_twin_warps(int head_dim, KvFormat format, int rows) {
  if (head_dim > 64) return 0;
  return (rows == 16 && format == KvFormat::kFP8E4M3) || (rows == 8 && kv_code_bits(format).k_bits == 16) ? 2 : 0;
}
constexpr int decode_quant_short_twin_blocks(KvFormat format) { return kv_code_bits(format).k_bits == 16 ? 6 : 8; }

// `rows`: the block's packed query rows, 16 (quant_decode_kernel) or 8 (the keys-as-rows kernel);
// `warps`: 4, or the short-block twin's.
constexpr DecodeQuantTile decode_quant_tile(int head_dim, KvFormat format, int rows, int warps = 4) {
  const DecodeTile base = decode_tile(head_dim, 16, warps);
  const KvCodeBits bits = kv_code_bits(format);
  const bool three_blocks = head_dim <= 128 && bits.k_bits == 4 && bits.v_bits == 4;
  // FP8's 8-row block at D=64: four resident blocks (a 6-stage ring of 12 KB per warp, registers
  // bound for four: no spill), 4 stages in flight.
  const bool four_blocks = rows == 8 && head_dim <= 64 && format == KvFormat::kFP8E4M3;
  const bool short_twin = warps < 4 && warps == decode_quant_short_twin_warps(head_dim, format, rows);
  const bool deep_twin = short_twin && bits.k_bits < 16;  // FP8's: a 6-stage ring, 4 in flight
  DecodeQuantTile t{base, bits, 2,
                    short_twin ? decode_quant_short_twin_blocks(format) : three_blocks ? 3 : four_blocks ? 4 : 1, 2};
  const int ring_bytes = three_blocks ? 16 * 1024 : base.stages * 2 * base.warp_keys * head_dim * k16BitBytes;
  const int stages = (ring_bytes + (three_blocks ? 0 : t.stage_bytes() / 2)) / t.stage_bytes();
  t.stages = stages < 2 ? 2 : (stages > 12 ? 12 : stages);
  t.reserved_stages = four_blocks || deep_twin ? 6 : t.stages;
  if (four_blocks || deep_twin) t.stages = 4;  // (docs/TUNING.md, "Kernels")
  // FP8, INT8 and K8V4 at D=128: two resident blocks (a ring of 6-7 stages' memory) with 3 stages in
  // flight, ~100 KB per SM; fewer stages and more resident blocks measured slower (docs/TUNING.md, "Kernels").
  if (head_dim == 128 && bits.k_bits == 8) t.stages = 3;
  // INT4 at D=128: 5 of the 7 reserved stages in flight (three resident blocks unchanged)
  // (docs/TUNING.md, "Kernels").
  if (head_dim == 128 && three_blocks) t.stages = 5;
  if (detail::kv_format_traits(format).channel_keys) {
    t.group_bytes = 4 * head_dim;
    // A run's slot is refilled when the run kGroupSlots later is issued, kStages - 1 sub-tiles
    // ahead of the reads: after the run's first sub-tile has been read (its Q fragment built).
    t.group_slots = (t.stages - 1) / 4 + 1;
  }
  return t;
}

// Resident blocks per SM by registers where fewer than shared memory allows on sm_90 (sm_90a,
// TileSummary::register_blocks), of a block of `rows` packed rows (ptxas; registers per thread in
// docs/TUNING.md, "Kernels"). The INT4 tile's ring is sized for three blocks at D <= 128 (four fit
// at D=64): at D=64 the 16-row block and the 8-row variants instances hold three; at D=128 the
// 16-row variants instances (bound for two) hold two. The keys-per-channel 8-row kernel: INT4_kc's
// variants at D=128 hold two; with fp16 Q (its operand in two halves) also INT4_kc's plain
// instance at D=128, INT4_kc's capped and K8V4_kc's variants at D=64.
constexpr TileSummary::RegisterBlocks decode_quant_register_blocks(int head_dim, KvFormat format, int rows, bool fp16) {
  using RB = TileSummary::RegisterBlocks;
  const KvCodeBits bits = kv_code_bits(format);
  if (head_dim > 128) return {};
  if (detail::kv_format_traits(format).channel_keys) {
    if (rows != 8) return {};
    const bool int4 = bits.k_bits == 4 && bits.v_bits == 4;
    if (head_dim <= 64) return !fp16 ? RB{} : int4 ? RB{0, 0, 2} : bits.v_bits == 4 ? RB{0, 2, 2} : RB{};
    return int4 ? (fp16 ? RB{2, 2, 2} : RB{0, 2, 2}) : RB{};
  }
  if (bits.k_bits != 4 || bits.v_bits != 4) return {};
  if (head_dim <= 64) return rows == 16 ? RB{3, 3, 3} : RB{0, 3, 3};
  return rows == 16 ? RB{0, 2, 2} : RB{};
}

// The block over codes with `rows` packed rows.
constexpr TileSummary decode_quant_rows_summary(int head_dim, KvFormat format, int rows) {
  const DecodeQuantTile t = decode_quant_tile(head_dim, format, rows);
  TileSummary s{rows, t.base.block_keys(), t.base.warps, t.stages, t.smem_bytes()};
  s.register_blocks = decode_quant_register_blocks(head_dim, format, rows, false);
  s.fp16_register_blocks = decode_quant_register_blocks(head_dim, format, rows, true);
  if (const int warps = decode_quant_short_twin_warps(head_dim, format, rows); warps > 0) {
    const DecodeQuantTile twin = decode_quant_tile(head_dim, format, rows, warps);
    s.short_twin = TileSummary::ShortTwin{warps, twin.smem_bytes(), twin.min_blocks_per_sm, twin.stages};
  }
  return s;
}
constexpr TileSummary decode_quant_summary(int head_dim, KvFormat format) {
  return decode_quant_rows_summary(head_dim, format, decode_tile(head_dim).block_m);
}
// decode_quant_n8: the same block with 8 packed rows (keys as the MMA's rows). Also
// decode_mma_n8's (the same kernel over a 16-bit cache): KvFormat::kNative has 16-bit rows, whose
// byte-counted ring comes out at decode_mma's depth (4 stages at D=64, 3 at D=128 and 256).
constexpr TileSummary decode_quant_n8_summary(int head_dim, KvFormat format) {
  return decode_quant_rows_summary(head_dim, format, 8);
}

}  // namespace splitkv::tiles
