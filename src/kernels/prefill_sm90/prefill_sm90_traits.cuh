// Compile-time configuration of the sm_90a prefill family: wgmma tiled MMAs, 128-byte-swizzled
// shared-memory layouts that both TMA and wgmma read, TMA copy types and the shared storage.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "kernels/prefill_sm90/prefill_sm90_tile.hpp"

namespace splitkv::detail {

template <class Element_, int kHeadDim_, tiles::PrefillSm90Variant kVariant = tiles::PrefillSm90Variant::kDefault>
struct PrefillSm90Traits {
  using Element = Element_;
  static constexpr tiles::PrefillSm90Tile kTile = tiles::prefill_sm90_tile(kHeadDim_, kVariant);
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kTile.block_m;
  static constexpr int kBlockN = kTile.block_n;    // keys per K tile (and main-loop step)
  static constexpr int kBlockNV = kTile.v_keys();  // keys per V tile
  static constexpr int kStages = kTile.stages;     // K and V share one ring
  // A stage holds one V tile (kBlockNV x D) or one column slice of a K tile (kBlockN x kKSliceCols):
  // per step, kKSlices K slices then kVTiles V tiles (one each, but for prefill_sm90_v64).
  static constexpr int kVTiles = kTile.v_tiles_per_step();
  static constexpr int kKSlices = kVTiles;
  static constexpr int kKSliceCols = kHeadDim / kKSlices;
  static_assert(kBlockN % kBlockNV == 0 && kBlockNV % 16 == 0, "V tiles of whole k-blocks split a K tile evenly");
  static_assert(kKSliceCols % 64 == 0, "K slices of whole 128-byte swizzle atoms");
  static constexpr int kQBuffers = kTile.q_buffers;
  static constexpr int kConsumerWarpgroups = kTile.consumer_warpgroups;
  static constexpr int kThreads = kTile.threads();
  static constexpr int kBlocksPerSm = kTile.blocks_per_sm();  // the launch bounds' minimum
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  // setmaxnreg: the producer gives its registers to the consumers. The pool is what the launch
  // allocated (65536 / (threads x blocks per SM) per lane, rounded down to 8), so producer +
  // consumers must not pass it: 2 consumers, 3 x 168 = 504; 3 consumers, 4 x 128 = 512; one
  // consumer in two blocks per SM, 2 x 128 = 256. A larger total makes the consumers'
  // setmaxnreg.inc wait forever (a hang, seen). At 24 registers the producer spills a few
  // words in its paged loop (4 reloads per K/V step in each warp); a larger producer (40 + 2 x 232)
  // costs the consumers' loop 2-3 reloads per step, so two consumers keep 240. Three consumers
  // (D=64 only: S is 64 x 128, O 64 x 64 in fp32) get 160, FlashAttention-3's split. One consumer
  // (S 64 x 64, O 64 x 128) runs as well at 216 as at 232 (5 more instructions, no local memory),
  // and the producer's 40 cut its spills from 188/240 bytes to 28/28 (docs/TUNING.md, "Kernels").
  static constexpr int kProducerRegisters = kConsumerWarpgroups == 1 ? 40 : 24;
  static constexpr int kConsumerRegisters =
      kConsumerWarpgroups == 1 ? 216 : (kConsumerWarpgroups == 2 ? 240 : 160);
  static_assert(kProducerRegisters + kConsumerWarpgroups * kConsumerRegisters <=
                    (65536 / (kThreads * kBlocksPerSm)) / 8 * 8 * (1 + kConsumerWarpgroups),
                "setmaxnreg would ask for more registers than the launch allocated");
  static_assert(kConsumerWarpgroups <= 2 || (kConsumerWarpgroups == 3 && kHeadDim == 64),
                "three consumer warpgroups fit their registers at D=64 only");
  static_assert(kBlockM == 64 * kConsumerWarpgroups, "each consumer warpgroup owns 64 query rows");
  static_assert(kHeadDim % 64 == 0, "rows are whole 128-byte swizzle atoms");

  // Consumer warpgroups stacked along M: S = Q K^T with both operands in shared memory (SS), and
  // O += P V with P from registers (RS) and V read MN-major (its head dim is contiguous).
  using AtomLayout = cute::Layout<cute::Shape<cute::Int<kConsumerWarpgroups>, cute::_1, cute::_1>>;
  using TiledMmaQK = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float, cute::Shape<cute::_64, cute::Int<kBlockN>, cute::Int<kHeadDim>>>(),
      AtomLayout{}));
  using TiledMmaPV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float, cute::Shape<cute::_64, cute::Int<kHeadDim>, cute::Int<kBlockN>>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      AtomLayout{}));

  // 8 rows x 64 elements (128 bytes), 128-byte swizzle: what TMA writes and wgmma reads.
  using SmemAtom = cute::GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  // The ring's stages seen as K slices (N, D / kKSlices, S) and as V tiles (NV, D, S): the same
  // memory, one stage apart by the same stride.
  using SmemLayoutK = decltype(cute::tile_to_shape(
      SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kKSliceCols>, cute::Int<kStages>>{}));
  using SmemLayoutV = decltype(cute::tile_to_shape(
      SmemAtom{}, cute::Shape<cute::Int<kBlockNV>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));
  static constexpr int kStageElems = kTile.stage_elems();
  static_assert(cute::cosize_v<SmemLayoutK> == kStages * kStageElems && cute::cosize_v<SmemLayoutV> == kStages * kStageElems);
  // The same V memory seen as V^T (D, NV, S): the B operand of P V.
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutV{}, cute::make_ordered_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockNV>, cute::Int<kStages>>{},
                                               cute::Step<cute::_2, cute::_1, cute::_3>{})));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  struct SharedStorage {
    cute::array_aligned<Element, kQBuffers * cute::cosize_v<SmemLayoutQ>, 1024> q;  // kQBuffers (M, D) tiles
    cute::array_aligned<Element, kStages * kStageElems, 1024> kv;
    typename Pipeline::SharedStorage pipeline_kv;
    // Per Q buffer: full (the producer's Q load, and its tile id written before), empty (every
    // consumer thread done with the tile, its epilogue included: the epilogue stages O there).
    uint64_t q_full[kQBuffers];
    uint64_t q_empty[kQBuffers];
    int tile_id[kQBuffers];          // the buffer's tile, or -1: no more tiles
    int tile_pages_bad[kQBuffers];   // a paged cache's tile has a page id outside the pool
    float wait_order_sink[kConsumerThreads];  // one word per consumer thread: see keep_before_next_wait
    int stream_arrival[kConsumerWarpgroups];  // a stream-K part's arrival on its slot (stream_k_merge.cuh)
  };
  static constexpr int kSmemBytes = kTile.smem_bytes();
  static_assert(int(sizeof(SharedStorage)) + 1024 <= kSmemBytes, "the tile table undercounts shared memory");
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kStageBytes = kStageElems * sizeof(Element);  // every stage's TMA bytes

  // Global tensors as TMA sees them: (tokens, head dim, heads, batch slots).
  using GmemShape = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using GmemLayout = cute::Layout<GmemShape, cute::Stride<int64_t, cute::_1, int64_t, int64_t>>;
  using GmemTensor = decltype(cute::make_tensor(cute::make_gmem_ptr(static_cast<const Element*>(nullptr)), GmemLayout{}));
  // Q arrives as one (M, D) box, or, in a tile that packs a KV head's query heads (kPackGqa), as
  // M / 8 boxes of 8 rows, each from its own head and queries: rows [8 j, 8 j + 8) of the tile.
  static constexpr bool kPackGqa =
      kVariant == tiles::PrefillSm90Variant::kPackGqa || kVariant == tiles::PrefillSm90Variant::kGqa64;
  static constexpr int kQBoxRows = kPackGqa ? 8 : kBlockM;
  using SmemLayoutQBox = std::conditional_t<
      kPackGqa,
      decltype(cute::composition(SmemLayoutQ{}, cute::Layout<cute::Shape<cute::Int<kQBoxRows>, cute::Int<kHeadDim>>,
                                                             cute::Stride<cute::_1, cute::Int<kBlockM>>>{})),
      SmemLayoutQ>;
  using TmaQ = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQBox{},
                                            cute::Shape<cute::Int<kQBoxRows>, cute::Int<kHeadDim>>{}, cute::_1{}));
  using TmaK = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{}, cute::take<0, 2>(SmemLayoutK{}),
                                            cute::Shape<cute::Int<kBlockN>, cute::Int<kKSliceCols>>{}, cute::_1{}));
  using TmaV = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{}, cute::take<0, 2>(SmemLayoutV{}),
                                            cute::Shape<cute::Int<kBlockNV>, cute::Int<kHeadDim>>{}, cute::_1{}));

  // A paged KV cache arrives in boxes of kPageRows keys, each from its own page: page sizes are
  // multiples of 16, so a box never straddles two pages. A box lands in rows [16 j, 16 j + 16) of a
  // stage: the stage's layout restricted to those rows (its column atoms stay rows x 64 apart).
  static constexpr int kPageRows = 16;
  static_assert(kBlockNV % kPageRows == 0);
  template <class StageLayout, int kRows, int kCols>
  using BoxLayout = decltype(cute::composition(
      StageLayout{},
      cute::Layout<cute::Shape<cute::Int<kPageRows>, cute::Int<kCols>>, cute::Stride<cute::_1, cute::Int<kRows>>>{}));
  using SmemLayoutKBox = BoxLayout<decltype(cute::take<0, 2>(SmemLayoutK{})), kBlockN, kKSliceCols>;
  using SmemLayoutVBox = BoxLayout<decltype(cute::take<0, 2>(SmemLayoutV{})), kBlockNV, kHeadDim>;
  // Global view of a paged cache: (page_size, D, Hkv, pages).
  using TmaKPage = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutKBox{},
                                                cute::Shape<cute::Int<kPageRows>, cute::Int<kKSliceCols>>{}, cute::_1{}));
  using TmaVPage = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutVBox{},
                                                cute::Shape<cute::Int<kPageRows>, cute::Int<kHeadDim>>{}, cute::_1{}));
  // (Pages of a multiple of kBlockN keys hold whole K tiles and V tiles and are read with TmaK and TmaV,
  // one box per K slice or V tile, over the same view.)

  // The TMA-store epilogue: a consumer's 64 output rows, staged in its rows of the Q buffer, go out as
  // one (64, D) box of O seen as (tokens, D, Hq, batch slots).
  static constexpr int kConsumerRows = 64;
  using SmemLayoutOConsumer = decltype(cute::composition(
      SmemLayoutQ{}, cute::Layout<cute::Shape<cute::Int<kConsumerRows>, cute::Int<kHeadDim>>,
                                  cute::Stride<cute::_1, cute::Int<kBlockM>>>{}));
  using TmaO = decltype(cute::make_tma_copy(cute::SM90_TMA_STORE{}, GmemTensor{}, SmemLayoutOConsumer{},
                                            cute::Shape<cute::Int<kConsumerRows>, cute::Int<kHeadDim>>{}, cute::_1{}));
};

}  // namespace splitkv::detail
