// Compile-time configuration of the decode kernel over a quantized KV cache: the decode_mma block
// shape (tile table), the code kinds of K and V, the byte layout of one warp's ring stage, and the
// fp16 MMA every format computes on.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/decode_quant/kv_codes.cuh"
#include "kernels/tile_table.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

constexpr CodeKind k_code_kind(KvFormat f) {
  return f == KvFormat::kFP8E4M3 ? CodeKind::kFp8 : (f == KvFormat::kInt4 ? CodeKind::kInt4 : CodeKind::kInt8);
}
constexpr CodeKind v_code_kind(KvFormat f) {
  return f == KvFormat::kFP8E4M3 ? CodeKind::kFp8
                                 : (f == KvFormat::kInt4 || f == KvFormat::kK8V4 ? CodeKind::kInt4 : CodeKind::kInt8);
}

template <class Element_, int kHeadDim_, KvFormat kFormat_>
struct DecodeQuantTraits {
  using Element = Element_;  // of Q and O
  static constexpr KvFormat kFormat = kFormat_;
  static constexpr tiles::DecodeQuantTile kTile = tiles::decode_quant_tile(kHeadDim_, kFormat_);
  static constexpr CodeKind kKCode = k_code_kind(kFormat_);
  static constexpr CodeKind kVCode = v_code_kind(kFormat_);
  using KCode = CodeTraits<kKCode>;
  using VCode = CodeTraits<kVCode>;

  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kTile.base.block_m;
  static constexpr int kWarpKeys = kTile.base.warp_keys;
  static constexpr int kWarps = kTile.base.warps;
  static constexpr int kThreads = kTile.base.threads();
  static constexpr int kBlockKeys = kTile.base.block_keys();
  static constexpr int kStages = kTile.stages;
  static constexpr int kMinBlocksPerSm = kTile.min_blocks_per_sm;
  static constexpr int kSmemBytes = kTile.smem_bytes();
  static constexpr int kQSmemBytes = kTile.base.q_smem_bytes();

  // One ring stage of a warp: K codes [16 keys][kKRowBytes], V codes [16][kVRowBytes] (rows
  // swizzled in 16-byte chunks, see code_offset), then (scale, min) words [16] for K and for V.
  static constexpr int kKRowBytes = kTile.k_row_bytes();
  static constexpr int kVRowBytes = kTile.v_row_bytes();
  static constexpr int kVOffset = kWarpKeys * kKRowBytes;
  static constexpr int kKScaleOffset = kVOffset + kWarpKeys * kVRowBytes;
  static constexpr int kVScaleOffset = kKScaleOffset + kTile.scale_bytes();
  static constexpr int kStageBytes = kTile.stage_bytes();
  static constexpr bool kTokenScales = kTile.bits.token_scales;
  // The tile table (host) and the code kinds (device) describe the format alike.
  static_assert(KCode::kBits == kTile.bits.k_bits && VCode::kBits == kTile.bits.v_bits);
  static_assert(kTokenScales == (kKCode != CodeKind::kFp8));

  static_assert(kBlockM == 16 && kWarpKeys == 16, "one warp computes one 16 x 16 score tile per step");
  static_assert(kVRowBytes % 32 == 0, "V rows are read by ldmatrix.x4 in pairs of 16-byte chunks");
  static_assert(kKRowBytes % 32 == 0, "each of a key's four threads reads at least 8 bytes of its codes");
  static_assert(kStageBytes % 16 == 0);

  // Every format multiplies fp16 operands: codes become fp16 exactly, Q is rounded to fp16 once
  // (after a power-of-two shift into fp16's range), P is fp16.
  using MmaOp = cute::SM80_16x8x16_F32F16F16F32_TN;
  // Used for the fragments' (row, column) coordinates; the MMAs are issued on raw registers.
  using TiledMma = cute::TiledMMA<cute::MMA_Atom<MmaOp>, cute::Layout<cute::Shape<cute::_1, cute::_1, cute::_1>>,
                                  cute::Tile<cute::_16, cute::_16, cute::_16>>;
};

// Byte offset of byte `byte` of key `key` in a sub-tile of rows of kRowBytes. The 16-byte chunks of
// a row are XOR-swizzled by key so that the same chunk of 8 consecutive keys (an ldmatrix 8x8, or
// a quarter warp's K reads) falls in 8 different bank groups.
template <int kRowBytes>
struct CodeSwizzle {
  static constexpr int kChunks = kRowBytes / 16;
  static constexpr int kKeysPerLine = kChunks >= 8 ? 1 : 8 / kChunks;  // keys sharing one 128-byte line
  static constexpr int kPhases = kChunks < 8 ? kChunks : 8;
  static constexpr int kPeriodKeys = kKeysPerLine * kPhases;  // offsets repeat (shifted) after this many keys
};

template <int kRowBytes>
__device__ __forceinline__ int code_offset(int key, int byte) {
  using S = CodeSwizzle<kRowBytes>;
  const int chunk = (byte / 16) ^ ((key / S::kKeysPerLine) % S::kPhases);
  return key * kRowBytes + chunk * 16 + byte % 16;
}

}  // namespace splitkv::detail
