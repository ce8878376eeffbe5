// Compile-time configuration of the decode kernel over a quantized KV cache: the decode_mma block
// shape (tile table), the code kinds of K and V, the byte layout of one warp's ring stage, and the
// fp16 MMA every quantized format computes on. The keys-as-rows kernel also reads 16-bit caches
// (KvFormat::kNative: the Q/O dtype, its MMA) through the same traits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "kernels/decode_quant/kv_codes.cuh"
#include "common/formats.hpp"
#include "kernels/decode_quant/decode_quant_tile.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

// kRows_: packed query rows per block (16; the keys-as-rows kernel's 8), which the tile's ring and
// register bound may depend on; kWarps_: 4, or the short-block twin's (decode_quant_short_twin_warps).
template <class Element_, int kHeadDim_, KvFormat kFormat_, int kRows_ = 16, int kWarps_ = 4>
struct DecodeQuantTraits {
  using Element = Element_;  // of Q and O
  static constexpr KvFormat kFormat = kFormat_;
  static constexpr tiles::DecodeQuantTile kTile = tiles::decode_quant_tile(kHeadDim_, kFormat_, kRows_, kWarps_);
  // The formats table's code kinds (a *_kc format's are its base format's; its keys' scales differ).
  static constexpr CodeKind kKCode = kv_format_traits(kFormat_).k_codes();
  static constexpr CodeKind kVCode = kv_format_traits(kFormat_).v_codes();
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
  // The register bound of a variants instance (softcap, window): the softcap's tanh made the
  // keys-per-channel INT4 loop spill at three blocks' 168 registers, so such instances keep two;
  // the short-block twin (uncapped only) keeps its tile's.
  static constexpr int kVariantsMinBlocksPerSm =
      kWarps_ < 4 ? kMinBlocksPerSm : (kMinBlocksPerSm > 2 ? 2 : kMinBlocksPerSm);
  // > 0: the uncapped variants instance's twin for short blocks has this many warps
  // (Plan::short_twin_warps).
  static constexpr int kShortTwinWarps =
      kWarps_ == 4 ? tiles::decode_quant_short_twin_warps(kHeadDim_, kFormat_, kRows_) : 0;
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
  static constexpr bool kTokenScales = kTile.bits.token_scales;  // of V, and of K unless kChannelKeys
  // Keys per channel over 64-key groups (*_kc): a warp takes its sub-tiles in runs of one group
  // (kRunSubtiles), and each run's fp16 (scale[D], min[D]) lands in one of the warp's kGroupSlots
  // slots of kGroupBytes, after every warp's ring (kGroupOffset from the first ring).
  static constexpr bool kChannelKeys = kv_format_traits(kFormat_).channel_keys;
  static constexpr int kKeyGroup = detail::kKeyGroup;
  static constexpr int kRunSubtiles = kChannelKeys ? kKeyGroup / kTile.base.warp_keys : 1;
  static constexpr int kGroupBytes = kTile.group_bytes;
  static constexpr int kGroupSlots = kTile.group_slots;
  static constexpr int kGroupOffset = kWarps * kStages * kStageBytes;
  static_assert(!kChannelKeys || (kBlockKeys % kKeyGroup == 0 && kGroupSlots >= 1),
                "splits start on group edges; a run's scales need a slot");
  // The tile table (host) and the code kinds (device) describe the format alike.
  static_assert(KCode::kBits == kTile.bits.k_bits && VCode::kBits == kTile.bits.v_bits);
  static_assert(kTokenScales == (kKCode == CodeKind::kInt8 || kKCode == CodeKind::kInt4));
  // K and V in the Q/O dtype: no codes, no scales.
  static constexpr bool kNative = kKCode == CodeKind::kNative16;
  static_assert(kNative == (kVCode == CodeKind::kNative16));
  // DecodeParams' K/V strides count bytes for a quantized cache and elements for a 16-bit one (as
  // decode_mma reads them); the loader addresses bytes.
  static constexpr int kStrideBytes = kNative ? 2 : 1;

  static_assert(kBlockM == 16 && kWarpKeys == 16, "one warp computes one 16 x 16 score tile per step");
  static_assert(kVRowBytes % 32 == 0, "V rows are read by ldmatrix.x4 in pairs of 16-byte chunks");
  static_assert(kKRowBytes % 32 == 0, "each of a key's four threads reads at least 8 bytes of its codes");
  static_assert(kStageBytes % 16 == 0);

  // Every quantized format multiplies fp16 operands: codes become fp16 exactly, Q is rounded to fp16
  // once (after a power-of-two shift into fp16's range), P is fp16. A 16-bit cache multiplies in
  // its own dtype (Q and K as stored, P rounded to it).
  static constexpr bool kBf16Operands = kNative && std::is_same_v<Element, cutlass::bfloat16_t>;
  using MmaOp = std::conditional_t<kBf16Operands, cute::SM80_16x8x16_F32BF16BF16F32_TN,
                                   cute::SM80_16x8x16_F32F16F16F32_TN>;
  // Used for the fragments' (row, column) coordinates; the MMAs are issued on raw registers.
  using TiledMma = cute::TiledMMA<cute::MMA_Atom<MmaOp>, cute::Layout<cute::Shape<cute::_1, cute::_1, cute::_1>>,
                                  cute::Tile<cute::_16, cute::_16, cute::_16>>;
};

// Two fp32 values as one MMA operand register of Traits' operand type (fp16, or bf16 for a bf16
// cache), round to nearest.
template <class Traits>
__device__ __forceinline__ uint32_t operand_pair(float lo, float hi) {
  if constexpr (Traits::kBf16Operands) {
    const __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&x);
  } else {
    const __half2 x = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&x);
  }
}

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
