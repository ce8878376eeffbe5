// Compile-time configuration of the decode kernel: tile sizes (from the shared tile table), the
// MMA, shared-memory layouts and copy atoms.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "kernels/decode/decode_tile.hpp"

namespace splitkv::detail {

template <class Element_, int kHeadDim_, int kBlockM_ = 16, int kWarps_ = 4, bool kClusterInbox_ = true>
struct DecodeTraits {
  using Element = Element_;
  static constexpr tiles::DecodeTile kTile = tiles::decode_tile(kHeadDim_, kBlockM_, kWarps_, kClusterInbox_);
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kTile.block_m;      // packed query rows (GQA group x queries)
  static constexpr int kWarpKeys = kTile.warp_keys;  // keys per warp sub-tile
  static constexpr int kWarps = kTile.warps;
  static constexpr int kStages = kTile.stages;
  static constexpr int kThreads = kTile.threads();
  static constexpr int kBlockKeys = kTile.block_keys();
  static constexpr int kSmemBytes = kTile.smem_bytes();
  // > 0: the variants instance's register-bound twin holds this many resident blocks per SM where
  // the uncapped variants instance's registers hold fewer (tiles::decode_register_blocks).
  static constexpr int kBoundVariantsBlocks = tiles::decode_bound_variants_blocks(kTile);
  // > 0: the uncapped variants instance's twin for short blocks has this many warps
  // (tiles::decode_short_twin_warps, Plan::short_twin_warps).
  static constexpr int kShortTwinWarps = tiles::decode_short_twin_warps(kTile);
  // > 0: that twin also has a version without the cluster merge's inbox, register-bound for this
  // many blocks per SM (one-split plans; tiles::decode_short_twin_bound_blocks).
  static constexpr int kShortTwinBoundBlocks = tiles::decode_short_twin_bound_blocks(kTile);
  static_assert((kBlockM == 16 || kBlockM == 32) && kWarpKeys == 16,
                "one warp computes the tile's 16 or 32 rows x 16 keys of scores per step");
  static_assert(kHeadDim % 64 == 0, "rows are built from 64-column swizzle atoms");
  static_assert(kStages >= 2);

  using MmaAtom = std::conditional_t<std::is_same_v<Element, cutlass::half_t>,
                                     cute::SM80_16x8x16_F32F16F16F32_TN,
                                     cute::SM80_16x8x16_F32BF16BF16F32_TN>;
  // One warp: a 16 x 16 x 16 tile (two m16n8k16 atoms along N), so a 16-key sub-tile of K is one
  // ldmatrix.x4 per k-step; a 32-row tile repeats it along M (the K fragment serves both halves).
  using TiledMma = cute::TiledMMA<cute::MMA_Atom<MmaAtom>, cute::Layout<cute::Shape<cute::_1, cute::_1, cute::_1>>,
                                  cute::Tile<cute::_16, cute::_16, cute::_16>>;

  // Rows of 64 elements (128 bytes) with the 16-byte chunks XOR-swizzled by row: ldmatrix and
  // the cp.async stores are bank-conflict free.
  using SmemLayoutAtom = decltype(cute::composition(
      cute::Swizzle<3, 3, 3>{}, cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));
  using SmemLayoutQ = decltype(cute::tile_to_shape(
      SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));  // (M, D)
  // One warp's ring of K (or V) sub-tiles.
  using SmemLayoutKV = decltype(cute::tile_to_shape(
      SmemLayoutAtom{}, cute::Shape<cute::Int<kWarpKeys>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));  // (N, D, S)
  // The same V memory seen as V^T (D, N, S): the B operand of P * V.
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutKV{},
      cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kWarpKeys>, cute::Int<kStages>>{},
                        cute::Stride<cute::Int<kWarpKeys>, cute::_1, cute::Int<kWarpKeys * kHeadDim>>{})));

  using SmemCopyAtom = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;

  // A warp copies a (16, D) sub-tile from global memory in 16-byte chunks, consecutive lanes along
  // a row (coalesced); rows past the sequence end are zero-filled, never read.
  static constexpr int kChunksPerRow = kHeadDim / 8;
  static_assert(32 % kChunksPerRow == 0 || kChunksPerRow % 32 == 0);
  static constexpr int kRowsPerCopy = kChunksPerRow >= 32 ? 1 : 32 / kChunksPerRow;
  static constexpr int kLanesPerRow = kChunksPerRow >= 32 ? 32 : kChunksPerRow;
  using GmemCopyAtom = cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>, Element>;
  using GmemWarpCopy = decltype(cute::make_tiled_copy(
      GmemCopyAtom{},
      cute::Layout<cute::Shape<cute::Int<kRowsPerCopy>, cute::Int<kLanesPerRow>>,
                   cute::Stride<cute::Int<kLanesPerRow>, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
};

}  // namespace splitkv::detail
