// Prefill forward on sm_90a: TMA loads, wgmma, warp specialization.
//
// Tiles (query block, query head, sequence x KV split), like the mma.sync family's grid, so
// planning, split-KV and the combine are shared. A block computes one tile, or, in a persistent
// grid (one block per SM, tiles with two Q buffers), one tile after another (tile_schedule.cuh).
// Per block: warpgroup 0 is the producer (one elected thread issues the TMA loads: a tile's Q into
// a free Q buffer, then K_t, V_t, K_t+1, ... through one ring of mbarrier-guarded stages that runs
// on from tile to tile, so the next tile's Q and first K/V tiles load while the consumers finish
// the current one; it gives its registers away; prefill_sm90_v64, the independent K and V tile
// shapes, sends each K tile as two column slices and each step's V as two 64-key tiles, one stage
// each); the other warpgroups (two, or three at D=64 in
// prefill_sm90_m192, or one in the two-blocks-per-SM prefill_sm90_gqa64) are consumers of 64 query
// rows each. Per K/V tile a consumer computes
// S = Q K^T (wgmma, both operands in shared memory), masks and folds S into its online softmax
// (fp32 statistics in registers), and accumulates O += P V (wgmma with P from registers, V read
// transposed through its descriptor). The consumer warpgroups take turns issuing (ping-pong, round
// robin), and inside a warpgroup the softmax of tile t runs while P V of tile t - 1 is on the
// tensor cores (see the loop). Final rows are staged through the tile's Q buffer
// (smem_epilogue.cuh); split partials and NaN rows for bad device data use the common epilogue.
//
// Chunked prefill over a contiguous KV cache ([batch, capacity, Hkv, D], keys [0, seq_lens[b])) is
// the padded case with per-sequence key counts; a paged one arrives in 16-key boxes, one per
// producer lane, or, when its pages hold whole K/V tiles (page_size a multiple of the tile's keys),
// one box per tile as from a contiguous cache. Keys past the sequence's end inside the last tile
// can hold anything (a varlen neighbour's tokens, padding, unused cache slots, NaN): their scores
// are masked to -inf, and their V rows are zeroed in shared memory before P V, because 0 * NaN is
// NaN.
//
// The two-pass strategy (family prefill_sm90_twopass) runs this kernel twice: kStats streams K
// alone and keeps only each row's max and sum of exponentials (written to p.row_max / p.row_sum);
// kFromStats is the loop above with those final statistics, so P is final when it is made and O
// is never rescaled.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/arch/reg_reconfig.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/score_softcap.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/prefill_common.cuh"
#include "kernels/prefill_sm90/prefill_sm90_traits.cuh"
#include "kernels/prefill_sm90/smem_epilogue.cuh"
#include "kernels/prefill_sm90/stream_k_merge.cuh"
#include "kernels/prefill_sm90/tile_schedule.cuh"

namespace splitkv::detail {

template <class Traits>
struct PrefillSm90Params {
  PrefillParams p;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaK tma_k;  // K slices
  typename Traits::TmaV tma_v;  // V tiles
  typename Traits::TmaKPage tma_k_pages;  // paged caches (p.kv.block_table != nullptr) only
  typename Traits::TmaVPage tma_v_pages;
  typename Traits::TmaK tma_k_page_tiles;  // page_tiles only: one box per K slice or V tile
  typename Traits::TmaV tma_v_page_tiles;
  typename Traits::GmemShape shape_q;      // (tokens, D, Hq, batch slots)
  typename Traits::GmemShape shape_kv;     // (tokens, D, Hkv, batch slots)
  typename Traits::GmemShape shape_pages;  // (page_size, D, Hkv, pages)
  bool page_tiles;                         // a paged cache whose pages hold whole K tiles
  TmaStoreO<Traits> store_o;
};

// The TMA descriptors this call's loads and stores use, fetched ahead of their first copy.
template <class Traits>
__device__ __forceinline__ void prefetch_tma_descriptors(const PrefillSm90Params<Traits>& params) {
  cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
  if (params.p.kv.block_table == nullptr) {
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
  } else if (params.page_tiles) {
    cute::prefetch_tma_descriptor(params.tma_k_page_tiles.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v_page_tiles.get_tma_descriptor());
  } else {
    cute::prefetch_tma_descriptor(params.tma_k_pages.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v_pages.get_tma_descriptor());
  }
  if (params.store_o.enabled) cute::prefetch_tma_descriptor(params.store_o.tma.get_tma_descriptor());
}

// Named barriers of the consumer warpgroups, counted from the first id CUTLASS leaves free: all
// consumers (zeroing a ragged V tile), each consumer's turn to issue Q K^T (ping-pong), and each
// consumer's epilogue (its O tile staged in shared memory).
constexpr uint32_t kConsumersBarrier = 0;
constexpr uint32_t kTurnBarrier = 1;      // + consumer index (at most three consumers)
constexpr uint32_t kEpilogueBarrier = 4;  // + consumer index
// The producer warps of a paged cache: warp 0 has written the next tile's id to shared memory.
constexpr uint32_t kProducerBarrier = 7;
// A paged cache's K/V tiles arrive in many small boxes and each TMA copy costs its warp a loop over
// the lanes' coordinates, so every producer warp issues a share of the boxes (one warp issuing all
// of them fell behind the consumers (docs/TUNING.md, "Kernels")).
constexpr int kPagedProducerWarps = 4;
static_assert(32 * kPagedProducerWarps == 128, "the producer barrier joins the producer warpgroup");

// Ping-pong (FlashAttention-3's schedule): consumer c issues its Q K^T only on its turn and hands
// the turn to consumer c + 1 (round robin) right after issuing, so the warpgroups' products
// alternate on the tensor cores and one's softmax runs while another's products do, instead of all
// drifting into the same phase. A turn barrier joins two warpgroups: the one passing (arrive) and
// the one waiting (sync). The turns run on across a block's tiles: the last consumer primes
// consumer 0's first turn once, every step passes, and consumer 0 takes the one pass left over
// after the block's last tile. So consumer 0 starts the next tile's first Q K^T while the others
// finish the current tile (last P V, epilogue), instead of every tile starting with all idle.
// A block of one consumer (prefill_sm90_gqa64) has nobody to take turns with: its products alternate
// with those of the SM's other block, which the scheduler interleaves without a barrier.
constexpr int kTurnThreads = 2 * 128;
template <class Traits>
__device__ __forceinline__ void wait_turn(int consumer) {
  if constexpr (Traits::kConsumerWarpgroups > 1) cutlass::arch::NamedBarrier::sync(kTurnThreads, kTurnBarrier + consumer);
}
template <class Traits>
__device__ __forceinline__ void pass_turn(int consumer) {
  if constexpr (Traits::kConsumerWarpgroups > 1) {
    cutlass::arch::NamedBarrier::arrive(kTurnThreads, kTurnBarrier + (consumer + 1) % Traits::kConsumerWarpgroups);
  }
}

// Zeroes rows [valid_rows, NV) of a (NV, D) shared-memory V tile, 16 bytes per store, then makes the
// writes visible to wgmma and waits for the other consumers.
template <class Traits, class SmemTile>
__device__ __forceinline__ void zero_rows_from(SmemTile sV_stage, int valid_rows, int consumer_tid) {
  using Element = typename Traits::Element;
  constexpr int kChunks = Traits::kHeadDim / 8;  // 16-byte chunks per row: contiguous under the swizzle
  for (int idx = valid_rows * kChunks + consumer_tid; idx < Traits::kBlockNV * kChunks; idx += Traits::kConsumerThreads) {
    *reinterpret_cast<cute::uint128_t*>(&sV_stage(idx / kChunks, idx % kChunks * 8)) = cute::uint128_t{0, 0};
  }
  cutlass::arch::fence_view_async_shared();
  cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, kConsumersBarrier);
  static_assert(sizeof(Element) == 2);
}

// Producer: the K/V tiles of one tile of queries into the ring (K_0, V_0, K_1, ... or, for the
// statistics pass, K_0, K_1, ...), each K tile as Traits::kKSlices column slices and each step's V
// as Traits::kVTiles tiles, one ring stage each (one of each, but for prefill_sm90_v64). Token
// tensors and a contiguous cache: lane 0 of warp 0 issues one TMA load per stage. A paged cache: a
// K tile's keys are kBoxes boxes of kPageRows keys, each from its key's page; in each of the
// kPagedProducerWarps warps lane j loads box j's page id (the next tile's while this tile's boxes go
// out), and box j of every K slice and of the V tile that holds its keys is issued by lane j of warp
// j % kPagedProducerWarps (every warp waits for each stage; warp 0's lane 0 expects its bytes).
// Every box arrives (the stage's transaction count is a whole stage), so boxes past the sequence's
// end read its last page (their keys are masked, their V rows zeroed).
// The boxes read every page id of the tile's keys (pages hold a multiple of 16 keys), so they also
// check them: a page id outside the pool is read as page 0 instead (never dereferenced), and
// *pages_bad (this tile's flag, which the consumers read in their epilogue) is set before the last
// stage's loads are announced, so the consumers see it once they have waited for that stage.
// Pages that hold whole K tiles (params.page_tiles) take one box per stage, issued and checked by
// warp 0's lane 0 alone, as for a contiguous cache.
template <class Traits, bool kUsesV, class Pipeline, class PipelineState, class SmemK, class SmemV>
__device__ __forceinline__ void load_kv_tiles(const PrefillSm90Params<Traits>& params,
                                              const PrefillBlock<typename Traits::Element>& blk, Pipeline& pipeline,
                                              PipelineState& write, SmemK sK, SmemV sV, int warp, int lane,
                                              int* pages_bad) {
  using namespace cute;
  constexpr int D = Traits::kHeadDim;
  constexpr int kN = Traits::kBlockN;
  constexpr int kNV = Traits::kBlockNV;
  constexpr int kKCols = Traits::kKSliceCols;
  constexpr int kKSlices = Traits::kKSlices;
  constexpr int kVTiles = Traits::kVTiles;
  const PrefillParams& p = params.p;
  const PrefillSequence& seq = blk.seq;
  const int first_kv_tile = blk.keys.lo / kN;  // split chunks are whole tiles
  if (p.kv.block_table != nullptr && params.page_tiles) {
    // Pages of a multiple of kN keys: tile t is in one page; its stages are boxes of that page,
    // issued by warp 0's lane 0 (the only producer warp then), which also checks the page id.
    if (lane != 0) return;
    Tensor mKp = params.tma_k_page_tiles.get_tma_tensor(params.shape_pages);  // (page_size, D, Hkv, pages)
    Tensor mVp = params.tma_v_page_tiles.get_tma_tensor(params.shape_pages);
    const int32_t* pages = p.kv.block_table + blk.b * p.kv.block_table_stride;
    bool bad = false;
    auto page_of = [&](int t) {
      const int page = pages[p.kv.page_size.div((first_kv_tile + t) * kN)];
      const bool outside = page < 0 || page >= p.kv.num_pages;
      bad |= outside;
      return outside ? 0 : page;
    };
    auto load_box = [&](const auto& tma, const auto& gBox, const auto& sBox) {
      pipeline.producer_acquire(write);
      auto [tBg, tBs] = tma_partition(tma, _0{}, Layout<_1>{}, group_modes<0, 2>(sBox), group_modes<0, 2>(gBox));
      copy(tma.with(*pipeline.producer_get_barrier(write), 0), tBg, tBs);
      ++write;
    };
    int page = blk.n_blocks > 0 ? page_of(0) : 0;
    for (int t = 0; t < blk.n_blocks; ++t) {
      const int next_page = t + 1 < blk.n_blocks ? page_of(t + 1) : 0;  // its load overlaps this tile's waits
      if (t + 1 == blk.n_blocks && bad) *pages_bad = 1;  // published by the last stage's arrive
      const int key_in_page = p.kv.page_size.mod((first_kv_tile + t) * kN);
      CUTE_UNROLL
      for (int c = 0; c < kKSlices; ++c) {
        load_box(params.tma_k_page_tiles,
                 local_tile(mKp(_, _, blk.kv_head, page), Shape<Int<kN>, Int<kKCols>>{}, make_coord(key_in_page / kN, c)),
                 sK(_, _, write.index()));  // (N, D / slices)
      }
      if constexpr (kUsesV) {
        CUTE_UNROLL
        for (int j = 0; j < kVTiles; ++j) {
          load_box(params.tma_v_page_tiles,
                   local_tile(mVp(_, _, blk.kv_head, page), Shape<Int<kNV>, Int<D>>{},
                              make_coord(key_in_page / kNV + j, _0{})),
                   sV(_, _, write.index()));  // (NV, D)
        }
      }
      page = next_page;
    }
  } else if (p.kv.block_table != nullptr) {
    constexpr int kBoxes = kN / Traits::kPageRows;
    constexpr int kBoxesPerV = kNV / Traits::kPageRows;
    static_assert(kBoxes <= 32, "one box's page id per lane");
    Tensor mKp = params.tma_k_pages.get_tma_tensor(params.shape_pages);  // (page_size, D, Hkv, pages)
    Tensor mVp = params.tma_v_pages.get_tma_tensor(params.shape_pages);
    const int32_t* pages = p.kv.block_table + blk.b * p.kv.block_table_stride;
    const bool has_box = lane < kBoxes;  // every warp reads every page id of the tile: the page check
    const bool issues_box = has_box && lane % kPagedProducerWarps == warp;
    auto first_key = [&](int t) { return (first_kv_tile + t) * kN + lane * Traits::kPageRows; };
    bool bad = false;
    auto page_of = [&](int t) {
      const int page = pages[p.kv.page_size.div(min(first_key(t), seq.k_len - 1))];
      const bool outside = page < 0 || page >= p.kv.num_pages;
      bad |= outside;
      return outside ? 0 : page;
    };
    // This lane's box of the stage (rows [16 row_box, 16 row_box + 16)), if it issues one there.
    auto load_box = [&](bool issues, const auto& tma, const auto& gBox, const auto& sStage, int row_box) {
      pipeline.producer_acquire(write);  // every lane waits for the stage; the leader expects its bytes
      __syncwarp();
      if (issues) {
        Tensor sBox = local_tile(sStage, Shape<Int<Traits::kPageRows>, Int<decltype(size<1>(sStage))::value>>{},
                                 make_coord(row_box, _0{}));
        auto [tBg, tBs] = tma_partition(tma, _0{}, Layout<_1>{}, group_modes<0, 2>(sBox), group_modes<0, 2>(gBox));
        copy(tma.with(*pipeline.producer_get_barrier(write), 0), tBg, tBs);
      }
      ++write;
    };
    int page = has_box && blk.n_blocks > 0 ? page_of(0) : 0;
    for (int t = 0; t < blk.n_blocks; ++t) {
      const int next_page = has_box && t + 1 < blk.n_blocks ? page_of(t + 1) : 0;
      // Every page read; warp 0's lane 0 is the pipeline's leader, whose arrive below publishes the flag.
      if (t + 1 == blk.n_blocks && __any_sync(0xffffffffu, bad) && warp == 0 && lane == 0) *pages_bad = 1;
      const int row_in_page = p.kv.page_size.mod(first_key(t)) / Traits::kPageRows;
      CUTE_UNROLL
      for (int c = 0; c < kKSlices; ++c) {
        load_box(issues_box, params.tma_k_pages,
                 local_tile(mKp(_, _, blk.kv_head, page), Shape<Int<Traits::kPageRows>, Int<kKCols>>{},
                            make_coord(row_in_page, c)),
                 sK(_, _, write.index()), lane);  // (16, D / slices)
      }
      if constexpr (kUsesV) {
        CUTE_UNROLL
        for (int j = 0; j < kVTiles; ++j) {  // V tile j holds boxes [j kBoxesPerV, (j + 1) kBoxesPerV)
          load_box(issues_box && lane / kBoxesPerV == j, params.tma_v_pages,
                   local_tile(mVp(_, _, blk.kv_head, page), Shape<Int<Traits::kPageRows>, Int<D>>{},
                              make_coord(row_in_page, _0{})),
                   sV(_, _, write.index()), lane % kBoxesPerV);  // (16, D)
        }
      }
      page = next_page;
    }
  } else if (lane == 0) {
    // Varlen tokens are one slot addressed by offset; padded tensors and a contiguous KV cache
    // have a slot per sequence (a cache's keys are [0, seq_lens[b]) of its slot).
    const int kv_slot = p.cu_seqlens_k != nullptr ? 0 : blk.b;
    Tensor mK = params.tma_k.get_tma_tensor(params.shape_kv)(_, _, blk.kv_head, kv_slot);
    Tensor mV = params.tma_v.get_tma_tensor(params.shape_kv)(_, _, blk.kv_head, kv_slot);
    Tensor gK = local_tile(domain_offset(make_coord(int(seq.k_begin), _0{}), mK), Shape<Int<kN>, Int<kKCols>>{},
                           make_coord(_, _));  // (N, D / slices, tiles, slices)
    Tensor gV = local_tile(domain_offset(make_coord(int(seq.k_begin), _0{}), mV), Shape<Int<kNV>, Int<D>>{},
                           make_coord(_, _0{}));  // (NV, D, V tiles)
    auto [tKgK, tKsK] = tma_partition(params.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVgV, tVsV] = tma_partition(params.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
    for (int t = 0; t < blk.n_blocks; ++t) {
      CUTE_UNROLL
      for (int c = 0; c < kKSlices; ++c) {
        pipeline.producer_acquire(write);
        copy(params.tma_k.with(*pipeline.producer_get_barrier(write), 0), tKgK(_, first_kv_tile + t, c),
             tKsK(_, write.index()));
        ++write;
      }
      if constexpr (kUsesV) {
        CUTE_UNROLL
        for (int j = 0; j < kVTiles; ++j) {
          pipeline.producer_acquire(write);
          copy(params.tma_v.with(*pipeline.producer_get_barrier(write), 0), tVgV(_, (first_kv_tile + t) * kVTiles + j),
               tVsV(_, write.index()));
          ++write;
        }
      }
    }
  }
}

// Producer, one thread: the tile's Q into sQ (M, D), completing on the barrier q_full. One (M, D)
// box of the tile's query head, or, for a tile that packs a KV head's query heads, M / 8 boxes of
// 8 rows, box j holding rows [8 j, 8 j + 8) (one head's queries: m is a multiple of 8); boxes past
// the heads' rows (padding) load box 0's rows again, so every tile brings the same bytes.
template <class Traits, class SmemQ>
__device__ __forceinline__ void load_q(const PrefillSm90Params<Traits>& params,
                                       const PrefillBlock<typename Traits::Element>& blk, int q_slot, SmemQ sQ,
                                       uint64_t* q_full) {
  using namespace cute;
  constexpr int D = Traits::kHeadDim;
  constexpr int kBox = Traits::kQBoxRows;
  Tensor mQ = params.tma_q.get_tma_tensor(params.shape_q);  // (tokens, D, Hq, batch slots)
  if constexpr (!Traits::kPackGqa) {
    Tensor gQ = local_tile(domain_offset(make_coord(int(blk.seq.q_begin + blk.row0), _0{}), mQ(_, _, blk.hq, q_slot)),
                           Shape<Int<Traits::kBlockM>, Int<D>>{}, make_coord(_0{}, _0{}));  // (M, D)
    auto [tQgQ, tQsQ] = tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    copy(params.tma_q.with(*q_full, 0), tQgQ, tQsQ);
  } else {
    const TileRows<true> rows = TileSchedule<true>::rows(blk, params.p);
    CUTE_UNROLL
    for (int box = 0; box < Traits::kBlockM / kBox; ++box) {
      const int r = box * kBox < rows.heads * rows.queries ? box * kBox : 0;
      Tensor gQ = local_tile(domain_offset(make_coord(int(blk.seq.q_begin + rows.query(r)), _0{}),
                                           mQ(_, _, rows.head(r), q_slot)),
                             Shape<Int<kBox>, Int<D>>{}, make_coord(_0{}, _0{}));  // (8, D)
      Tensor sBox = local_tile(sQ, Shape<Int<kBox>, Int<D>>{}, make_coord(box, _0{}));  // (8, D)
      auto [tQgQ, tQsQ] =
          tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sBox), group_modes<0, 2>(gQ));
      copy(params.tma_q.with(*q_full, 0), tQgQ, tQsQ);
    }
  }
}

// A step's K slices or V tiles: kCount consecutive ring items from `first`. wait_for_items waits
// for each and lists their stages, release_items hands them back, advanced is the position after
// them.
template <int kCount, class Pipeline, class PipelineState>
__device__ __forceinline__ void wait_for_items(Pipeline& pipeline, PipelineState first, int (&stages)[kCount]) {
  CUTE_UNROLL
  for (int i = 0; i < kCount; ++i) {
    stages[i] = first.index();
    pipeline.consumer_wait(first);
    ++first;
  }
}
template <int kCount, class Pipeline, class PipelineState>
__device__ __forceinline__ void release_items(Pipeline& pipeline, PipelineState first) {
  CUTE_UNROLL
  for (int i = 0; i < kCount; ++i) {
    pipeline.consumer_release(first);
    ++first;
  }
}
template <int kCount, class PipelineState>
__device__ __forceinline__ PipelineState advanced(PipelineState s) {
  CUTE_UNROLL
  for (int i = 0; i < kCount; ++i) ++s;
  return s;
}

// Consumers: one tile of queries (64 rows per warpgroup) from Q in sQ (M, D) and K/V in the ring
// (sK: its stages as K slices (N, D / slices, S); sV as V tiles (NV, D, S), and sVt the same as
// (D, NV, S)), through the epilogue. read_k is the ring position of the tile's first K slice and
// moves past its last item. pages_bad: the producer's flag for a
// paged cache's page ids (final once the tile's last stage has been waited for); set, the tile's
// rows are NaN. release_previous_q: called once the tile's first Q K^T is issued (or before the
// epilogue of a tile without keys); it hands the previous tile's Q buffer back (see the caller).
// cut_slot: >= 0 when the tile is a stream-K tail tile cut between two blocks and this is one part
// (blk.keys its keys): the parts meet in that workspace slot (stream_k_merge.cuh).
template <class Traits, PrefillPass kPass, bool kStreamK, bool kVariants, class Pipeline, class PipelineState,
          class SmemQ, class SmemK, class SmemV, class SmemVt, class ReleaseQ>
__device__ __forceinline__ void consume_tile(const PrefillParams& p, const TmaStoreO<Traits>& store_o,
                                             const PrefillBlock<typename Traits::Element>& blk, int cut_slot,
                                             const int& pages_bad, typename Traits::SharedStorage& smem, Pipeline& pipeline,
                                             PipelineState& read_k, SmemQ sQ, SmemK sK, SmemV sV, SmemVt sVt,
                                             int consumer, int consumer_tid, ReleaseQ&& release_previous_q) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kBlockN;
  constexpr int kNV = Traits::kBlockNV;
  constexpr int kKSlices = Traits::kKSlices;
  constexpr int kVTiles = Traits::kVTiles;
  const PrefillSequence& seq = blk.seq;
  const KeyRange& keys = blk.keys;
  const TileRows<Traits::kPackGqa> rows = TileSchedule<Traits::kPackGqa>::rows(blk, p);
  static_assert(!Traits::kPackGqa || kPass == PrefillPass::kFused, "packed tiles run the one-pass kernel only");
  // The sequence as the rows' writers see it: read only once the tile's last stage has been
  // waited for (the page check's flag is final then).
  auto rows_sequence = [&] {
    PrefillSequence s = seq;
    s.bad |= pages_bad != 0;
    return s;
  };

  typename Traits::TiledMmaQK mma_qk;
  auto thr_qk = mma_qk.get_thread_slice(consumer_tid);
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);  // (MMA, MMA_M, MMA_K) descriptors
  Tensor tSrK = thr_qk.partition_fragment_B(sK);  // (MMA, MMA_N, MMA_K of a slice, S): the ring's stages as K
  typename Traits::TiledMmaPV mma_pv;
  auto thr_pv = mma_pv.get_thread_slice(consumer_tid);
  Tensor tOrVt = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K of a V tile, S)

  Tensor acc_o = partition_fragment_C(mma_pv, Shape<Int<kM>, Int<D>>{});  // (MMA, MMA_M, MMA_N) fp32
  clear(acc_o);
  Tensor acc_o_rc = make_tensor(acc_o.data(), wgmma_acc_as_rows_cols(acc_o.layout()));  // (rows, cols)
  Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));    // -> (row, key)
  Tensor tScS_rc = make_tensor(tScS.data(), wgmma_acc_as_rows_cols(tScS.layout()));
  constexpr int kRows = decltype(size<0>(acc_o_rc))::value;
  OnlineSoftmax<kRows> softmax;
  softmax.reset();
  const ScoreSoftcapFast<kVariants> softcap(p.softcap, p.scale_log2);
  const float scale_log2 = softcap.logit_scale_log2(p.scale_log2);  // of the (capped) scores

  const int n_blocks = blk.n_blocks;

  if constexpr (kPass == PrefillPass::kStats) {
    // Statistics pass: S_t = Q K_t^T on its turn, folded into the row max and sum; nothing else.
    for (int t = 0; t < n_blocks; ++t) {
      const int n0 = keys.lo + t * kN;
      Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
      int k_stages[kKSlices];
      wait_for_items(pipeline, read_k, k_stages);
      wait_turn<Traits>(consumer);
      warpgroup_gemm_issue_slices<true>(mma_qk, tSrQ, tSrK, k_stages, acc_s);
      pass_turn<Traits>(consumer);
      if (t == 0) release_previous_q();
      warpgroup_wait<0>();
      fence_wgmma_operands(acc_s);
      release_items<kKSlices>(pipeline, read_k);
      read_k = advanced<kKSlices>(read_k);
      Tensor scores = make_tensor(acc_s.data(), wgmma_acc_as_rows_cols(acc_s.layout()));  // (rows, keys)
      if (n0 + kN > keys.mask_from) mask_scores(scores, tScS_rc, p, seq, blk.row0, n0, keys.hi);
      float rescale[kRows];  // unused: there is no O to rescale
      softmax.fold(scores, p.scale_log2, rescale);
    }
    release_previous_q();  // (a tile without keys)
    softmax.reduce_sums();
    store_two_pass_stats(p, rows_sequence(), blk.b, blk.hq, blk.row0, tScS_rc, softmax, consumer_tid % 4 == 0);
    return;
  }
  // Output pass of the two-pass strategy: the rows' final statistics.
  TwoPassRowStats<kRows> fixed;
  if constexpr (kPass == PrefillPass::kFromStats) fixed.load(p, seq, blk.b, blk.hq, blk.row0, tScS_rc, softmax);

  // P of the previous tile, the A operand of its P V: it stays in registers while that product runs.
  Tensor probs = make_tensor<Element>(partition_fragment_C(mma_qk, Shape<Int<kM>, Int<kN>>{}).layout());
  Tensor tOrP = make_tensor(probs.data(), wgmma_acc_as_a_operand(probs.layout()));  // A operand of P V

  // Intra-warpgroup overlap (FlashAttention-3's order): step t issues S_t = Q K_t^T and then
  // O += P_{t-1} V_{t-1} back to back, folds S_t into the softmax while the second product runs,
  // and touches O (the rescale) only once nothing is in flight, so ptxas keeps the products
  // asynchronous. The ring holds K_0, V_0, K_1, V_1, ... (each K as kKSlices stages, each V as
  // kVTiles): step t reads K_t and V_{t-1}.
  PipelineState read_v;  // V_{t-1}
  // One step; the first has no P V to issue, so it waits for S_0 alone (wait<1> would not).
  auto step = [&](int t, auto first) {
    constexpr bool kFirst = decltype(first)::value;
    const int n0 = keys.lo + t * kN;
    Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
    if (n0 + kN > seq.k_len) {  // the ragged last tile: zero V_t's rows past the end, before any turn wait
      PipelineState v_stage = advanced<kKSlices>(read_k);  // V_t
      CUTE_UNROLL
      for (int j = 0; j < kVTiles; ++j) {  // (one V tile: the tile's keys end inside it)
        const int valid = seq.k_len - (n0 + j * kNV);
        if (kVTiles == 1 || valid < kNV) {
          pipeline.consumer_wait(v_stage);
          zero_rows_from<Traits>(sV(_, _, v_stage.index()), kVTiles == 1 ? valid : max(valid, 0), consumer_tid);
        }
        ++v_stage;
      }
    }
    int k_stages[kKSlices];
    wait_for_items(pipeline, read_k, k_stages);
    wait_turn<Traits>(consumer);
    warpgroup_gemm_issue_slices<true>(mma_qk, tSrQ, tSrK, k_stages, acc_s);
    if constexpr (!kFirst) {
      int v_stages[kVTiles];
      wait_for_items(pipeline, read_v, v_stages);
      warpgroup_gemm_issue_slices<false>(mma_pv, tOrP, tOrVt, v_stages, acc_o);
    }
    pass_turn<Traits>(consumer);
    if constexpr (kFirst) release_previous_q();  // while S_0 runs
    warpgroup_wait<kFirst ? 0 : 1>();  // S_t is done (products retire in order); P_{t-1} V_{t-1} may still run
    fence_wgmma_operands(acc_s);
    release_items<kKSlices>(pipeline, read_k);

    Tensor scores = make_tensor(acc_s.data(), wgmma_acc_as_rows_cols(acc_s.layout()));  // (rows, keys)
    softcap.apply(acc_s);
    if (needs_mask<kVariants>(keys, n0, kN)) mask_scores<kVariants>(scores, tScS_rc, p, seq, blk.b, rows, n0, keys.hi);
    [[maybe_unused]] float rescale[kRows];  // the fused pass's O rescale
    float depends_on_every_exp;
    if constexpr (kPass == PrefillPass::kFromStats) {
      depends_on_every_exp = fixed.probabilities(scores, scale_log2);
    } else {
      softmax.fold(scores, scale_log2, rescale);
      depends_on_every_exp = softmax.row_sum[0] + softmax.row_sum[kRows - 1];
    }
    if constexpr (!kFirst) {
      // Storing a value that depends on every exponential holds the wait below the softmax.
      keep_before_next_wait(depends_on_every_exp, &smem.wait_order_sink[consumer_tid]);
      warpgroup_wait<0>();
      fence_wgmma_operands(acc_o, tOrP);
      release_items<kVTiles>(pipeline, read_v);
      // (O is still zero after the first step; the output pass never rescales)
      if constexpr (kPass == PrefillPass::kFused) OnlineSoftmax<kRows>::rescale_rows(acc_o_rc, rescale);
    }
    convert_fragment_into(acc_s, probs);
    read_v = advanced<kKSlices>(read_k);  // V_t
    read_k = advanced<kVTiles>(read_v);   // K_{t+1}
  };
  if (n_blocks > 0) {
    step(0, cute::true_type{});
    for (int t = 1; t < n_blocks; ++t) step(t, cute::false_type{});
    int v_stages[kVTiles];  // the last tile's P V
    wait_for_items(pipeline, read_v, v_stages);
    warpgroup_gemm_issue_slices<false>(mma_pv, tOrP, tOrVt, v_stages, acc_o);
    cute::warpgroup_wait<0>();
    fence_wgmma_operands(acc_o, tOrP);
    release_items<kVTiles>(pipeline, read_v);
  }

  // ---- Epilogue --------------------------------------------------------------------------------------
  release_previous_q();  // (a tile without keys)
  if constexpr (kPass == PrefillPass::kFused) softmax.reduce_sums();  // the output pass holds the full sums
  float lse[kRows], inv[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    lse[r] = softmax.lse(r, scale_log2);
    // The output pass applied 1 / sum to P already.
    inv[r] = kPass == PrefillPass::kFromStats ? 1.f : (softmax.row_sum[r] > 0.f ? 1.f / softmax.row_sum[r] : 0.f);
  }
  Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<kM>, Int<D>>{}));  // -> (row, col)
  Tensor tOcO_rc = make_tensor(tOcO.data(), wgmma_acc_as_rows_cols(tOcO.layout()));
  const PrefillSequence rows_seq = rows_sequence();
  fold_row_sinks<kVariants>(p, rows_seq, rows, tOcO_rc, lse, inv);
  if (p.output.mode == OutputMode::kFinal) {
    if constexpr (kStreamK) {
      static_assert(kPass == PrefillPass::kFused && !Traits::kPackGqa, "stream-K tails: the one-pass kernel, unpacked tiles");
      if (cut_slot >= 0 && !merge_cut_tile<Traits>(p, cut_slot, keys.lo == 0, consumer, consumer_tid % 128, acc_o_rc,
                                                   lse, inv, smem.stream_arrival[consumer], kEpilogueBarrier + consumer)) {
        return;  // the other part writes the rows
      }
    }
    write_final_rows_through_smem<Traits>(p, store_o, rows_seq, blk.b, rows, consumer, consumer_tid, sQ, acc_o, tOcO_rc,
                                          lse, inv, kEpilogueBarrier + consumer);
  } else {
    const RowWriter<Traits::kPackGqa> writer{p, rows_seq, blk.b, blk.split, rows};
    writer.template write<Element, D>(acc_o_rc, tOcO_rc, lse, inv, consumer_tid % 4 == 0);
  }
}

// kStreamK: the instantiation for plans with a stream-K tail (PrefillParams::stream_steps > 0).
// kVariants: the one-pass kernel's variants instance (PrefillParams' softcap and sliding window,
// docs/VARIANTS.md): scores capped before the masks, the key range of each tile cut to its rows'
// windows (producer and consumers locate tiles alike, so keys outside them are never loaded).
template <class Traits, PrefillPass kPass, bool kStreamK = false, bool kVariants = false>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kBlocksPerSm)
    prefill_sm90_kernel(const __grid_constant__ PrefillSm90Params<Traits> params) {
  using namespace cute;
  using Element = typename Traits::Element;
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Traits::PipelineState;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kBlockN;
  constexpr int kQBuffers = Traits::kQBuffers;
  constexpr bool kUsesV = kPass != PrefillPass::kStats;  // the ring holds K_0, V_0, K_1, ... or K_0, K_1, ...
  const PrefillParams& p = params.p;
  static_assert(!kVariants || (kPass == PrefillPass::kFused && !kStreamK), "variants: one pass, no stream-K tail");

  extern __shared__ char smem_raw[];
  // 128-byte swizzled tiles need 1024-byte alignment.
  char* smem_base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_base);

  // Until wait_for_prior_grids, only what reads no global memory: the barriers and the prefetch of
  // the TMA descriptors (kernel parameters), overlapping the previous kernel's tail.
  const int warpgroup = cutlass::canonical_warp_group_idx();
  if (threadIdx.x == 0) prefetch_tma_descriptors(params);

  typename Pipeline::Params pipeline_params;
  pipeline_params.transaction_bytes = Traits::kStageBytes;
  pipeline_params.role = warpgroup == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pipeline_params.is_leader = threadIdx.x == 0;
  pipeline_params.num_consumers = Traits::kConsumerThreads;
  Pipeline pipeline(smem.pipeline_kv, pipeline_params, Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) {
    for (int buf = 0; buf < kQBuffers; ++buf) {
      Barrier::init(&smem.q_full[buf], 1);
      Barrier::init(&smem.q_empty[buf], Traits::kConsumerThreads);
    }
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();
  wait_for_prior_grids();
  allow_dependent_launch();
  if (every_sequence_skipped(p)) return;  // the mixed route's prefill part with nothing to do
  const TileSchedule<Traits::kPackGqa, kStreamK, kVariants> schedule(p);
  if (schedule.idle()) return;  // the mixed route leaves this block's SM to the decode parts

  // Q buffer `buf` as an (M, D) tile.
  auto q_buffer = [&](int buf) {
    return make_tensor(make_smem_ptr(smem.q.data() + buf * cosize_v<typename Traits::SmemLayoutQ>),
                       typename Traits::SmemLayoutQ{});
  };
  // The ring's stages hold K slices or V tiles; sK, sV and sVt are views of the same memory.
  Tensor sK = make_tensor(make_smem_ptr(smem.kv.data()), typename Traits::SmemLayoutK{});    // (N, D / slices, S)
  Tensor sV = make_tensor(make_smem_ptr(smem.kv.data()), typename Traits::SmemLayoutV{});    // (NV, D, S)
  Tensor sVt = make_tensor(make_smem_ptr(smem.kv.data()), typename Traits::SmemLayoutVt{});  // (D, NV, S)

  if (warpgroup == 0) {
    // ---- Producer: warp 0, and for a paged cache read in 16-key boxes all four warps. Per tile: warp
    // 0 finds it (the next one is claimed once this one's loads are all issued, so a block claims only
    // what it is about to compute) and its lane 0 puts its id and Q into a free Q buffer; then the
    // warps issue its K/V tiles through the ring. ----------------------------------------------------
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    const int warp = threadIdx.x / 32;
    const bool paged_boxes = p.kv.block_table != nullptr && !params.page_tiles;  // 16-key boxes from four warps
    if (warp != 0 && !paged_boxes) return;
    const int lane = threadIdx.x % 32;
    PipelineState write = cutlass::make_producer_start_state<Pipeline>();
    int tile = schedule.first_tile(p);
    for (int i = 0;; ++i) {
      PrefillBlock<Element> blk;
      bool have = false;  // a tile with query rows (a short varlen member has none in its last tiles)
      const int buf = i % kQBuffers;
      if (warp == 0) {
        while (tile < schedule.total_tiles && !(have = schedule.locate(blk, p, tile, kM, kN))) {
          tile = blk.seq.q_len == 0 ? schedule.next_tile_past_sequence(p, tile) : schedule.next_tile(p, tile);
        }
        if (lane == 0) {
          Barrier::wait(&smem.q_empty[buf], ((i / kQBuffers) & 1) ^ 1);  // a fresh buffer is free
          smem.tile_id[buf] = have ? tile : -1;  // published by the arrive below (and the producer barrier)
          smem.tile_pages_bad[buf] = 0;          // load_kv_tiles' leader sets it
          if (have) {
            const int q_slot = p.cu_seqlens_q != nullptr ? 0 : blk.b;
            Barrier::arrive_and_expect_tx(&smem.q_full[buf], Traits::kQBytes);
            load_q<Traits>(params, blk, q_slot, q_buffer(buf), &smem.q_full[buf]);
          } else {
            Barrier::arrive(&smem.q_full[buf]);
          }
        }
      }
      if (paged_boxes) {
        // The other warps take the tile from warp 0, which may have claimed it from the counter (a
        // barrier the compiler moves no shared-memory access across, stream_k_merge.cuh).
        warpgroup_barrier(kProducerBarrier);
        if (warp != 0) {
          tile = smem.tile_id[buf];
          have = tile >= 0 && schedule.locate(blk, p, tile, kM, kN);  // true: warp 0 skipped rowless tiles
        }
      }
      if (!have) break;
      load_kv_tiles<Traits, kUsesV>(params, blk, pipeline, write, sK, sV, warp, lane, &smem.tile_pages_bad[buf]);
      // After a static schedule's last tile the consumers stop by themselves; otherwise a tile id of
      // -1 tells them.
      if (schedule.is_last(p, tile)) break;
      if (warp == 0) tile = schedule.next_tile(p, tile);
    }
    // Do not leave while loads are in flight: wait until the consumers released every stage (every
    // warp's boxes have landed by then).
    if (warp == 0 && lane == 0) pipeline.producer_tail(write);
    return;
  }

  // ---- Consumers: 64 query rows per warpgroup, the producer's tiles in order ------------------------
  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
  const int consumer_tid = threadIdx.x - 128;
  const int consumer = warpgroup - 1;
  if (consumer == Traits::kConsumerWarpgroups - 1) pass_turn<Traits>(consumer);  // consumer 0 goes first
  PipelineState read_k;  // the next tile's K_0
  // A tile's Q buffer also stages its output rows, which a TMA store reads after the epilogue has
  // moved on. Waiting for that read before the next tile (and arriving on q_empty) held the
  // warpgroup's next Q K^T behind it; with two Q buffers the buffer is not needed again before the
  // tile after next, so it is handed back once the next tile's first Q K^T is on the tensor cores.
  int pending_q_buffer = -1;
  auto release_pending_q = [&] {
    if (pending_q_buffer < 0) return;
    cute::tma_store_wait<0>();  // this thread's O rows are read (a no-op where it stored none)
    // This thread's last access to the buffer is done; the next Q's TMA may land.
    cutlass::arch::fence_view_async_shared();
    Barrier::arrive(&smem.q_empty[pending_q_buffer]);
    pending_q_buffer = -1;
  };
  for (int i = 0;; ++i) {
    const int buf = i % kQBuffers;
    Barrier::wait(&smem.q_full[buf], (i / kQBuffers) & 1);
    // Every thread reads the same word; a warp reduction says so to the compiler, which then keeps
    // the tile's loop counts and the ring's position in uniform registers (as with blockIdx).
    const int tile = __reduce_max_sync(0xffffffffu, smem.tile_id[buf]);
    if (tile < 0) break;
    PrefillBlock<Element> blk;
    schedule.locate(blk, p, tile, kM, kN);  // true: the producer skipped tiles without rows
    consume_tile<Traits, kPass, kStreamK, kVariants>(p, params.store_o, blk, schedule.cut_slot(p, tile), smem.tile_pages_bad[buf], smem, pipeline, read_k,
                                q_buffer(buf), sK, sV, sVt, consumer, consumer_tid, release_pending_q);
    if (schedule.is_last(p, tile)) break;
    pending_q_buffer = buf;
    if constexpr (kQBuffers == 1) release_pending_q();  // the next tile's Q goes into this buffer
  }
  cute::tma_store_wait<0>();  // no store may read shared memory after the block exits
  if (consumer == 0) wait_turn<Traits>(consumer);  // the last consumer's pass after the block's last step
}

}  // namespace splitkv::detail
