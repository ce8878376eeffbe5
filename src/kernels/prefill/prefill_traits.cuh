// Compile-time configuration of the prefill kernels (tile shapes from the shared tile table).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "kernels/prefill/prefill_tile.hpp"

namespace splitkv::detail {

template <class Element_, int kHeadDim_, tiles::PrefillVariant kVariant_>
struct PrefillTraits {
  using Element = Element_;
  static constexpr tiles::PrefillVariant kVariant = kVariant_;
  static constexpr tiles::PrefillTile kTile = tiles::prefill_tile(kHeadDim_, kVariant_);
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kTile.block_m;
  static constexpr int kBlockN = kTile.block_n;
  static constexpr int kWarps = kTile.warps;
  static constexpr int kThreads = kTile.threads();
  static constexpr int kSmemBytes = kTile.smem_bytes();
  // K arrives in kKSubTiles sub-tiles of kKSubKeys keys, V in kVSlices column slices of kVSliceCols.
  static constexpr int kKSubKeys = kTile.k_sub_keys;
  static constexpr int kKSubTiles = kBlockN / kKSubKeys;
  static constexpr int kVSliceCols = kTile.v_sub_cols;
  static constexpr int kVSlices = kHeadDim / kVSliceCols;
  static_assert(kBlockN % kKSubKeys == 0 && kKSubKeys % 16 == 0);
  static_assert(kHeadDim % kVSliceCols == 0 && kVSliceCols % 64 == 0);
  static_assert(kHeadDim % 64 == 0);

  using MmaAtom = std::conditional_t<std::is_same_v<Element, cutlass::half_t>,
                                     cute::SM80_16x8x16_F32F16F16F32_TN,
                                     cute::SM80_16x8x16_F32BF16BF16F32_TN>;
  // Warps stacked along M: each owns kBlockM / kWarps query rows, so softmax rows never cross warps.
  using TiledMma = cute::TiledMMA<cute::MMA_Atom<MmaAtom>, cute::Layout<cute::Shape<cute::Int<kWarps>, cute::_1, cute::_1>>,
                                  cute::Tile<cute::Int<16 * kWarps>, cute::_16, cute::_16>>;
  // One warp alone (split-V: every warp computes the whole score tile).
  using WarpMma = cute::TiledMMA<cute::MMA_Atom<MmaAtom>, cute::Layout<cute::Shape<cute::_1, cute::_1, cute::_1>>,
                                 cute::Tile<cute::_16, cute::_16, cute::_16>>;

  using SmemLayoutAtom = decltype(cute::composition(
      cute::Swizzle<3, 3, 3>{}, cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutKV{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{}, cute::GenRowMajor{})));

  // The block's shared memory (kSmemBytes): the Q tile, then one K tile and one V tile.
  __device__ static auto smem_q(char* smem) {  // (M, D)
    return cute::make_tensor(cute::make_smem_ptr(reinterpret_cast<Element*>(smem)), SmemLayoutQ{});
  }
  __device__ static auto smem_k(char* smem) {  // (N, D)
    return cute::make_tensor(cute::make_smem_ptr(reinterpret_cast<Element*>(smem) + kBlockM * kHeadDim),
                             SmemLayoutKV{});
  }
  __device__ static Element* smem_v_ptr(char* smem) {
    return reinterpret_cast<Element*>(smem) + (kBlockM + kBlockN) * kHeadDim;
  }
  __device__ static auto smem_v(char* smem) {  // (N, D)
    return cute::make_tensor(cute::make_smem_ptr(smem_v_ptr(smem)), SmemLayoutKV{});
  }
  __device__ static auto smem_vt(char* smem) {  // (D, N): the same V seen as the B operand of P * V
    return cute::make_tensor(cute::make_smem_ptr(smem_v_ptr(smem)), SmemLayoutVt{});
  }

  using SmemCopyAtom = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;

  // Block-wide 16-byte cp.async copies; rows past the sequence are zero-filled, never read.
  using GmemCopyAtom = cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>, Element>;
  template <int kCols>
  using GmemTiledCopy = decltype(cute::make_tiled_copy(
      GmemCopyAtom{},
      cute::Layout<cute::Shape<cute::Int<kThreads / (kCols / 8)>, cute::Int<kCols / 8>>,
                   cute::Stride<cute::Int<kCols / 8>, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
  using GmemCopyRows = GmemTiledCopy<kHeadDim>;     // Q tiles and K sub-tiles: whole rows
  using GmemCopyVSlice = GmemTiledCopy<kVSliceCols>;  // V column slices
  static_assert(kKSubKeys % (kThreads / (kHeadDim / 8)) == 0, "a K sub-tile is whole copy passes");
};

}  // namespace splitkv::detail
