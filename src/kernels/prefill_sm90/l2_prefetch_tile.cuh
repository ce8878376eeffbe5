// What a prefill_sm90 block does before it waits for the kernel ahead of it in the stream: the
// prefill side of the decode kernels' L2 prefetch (decode/l2_prefetch.cuh says why it is safe: L2
// is the point of coherence, so a line fetched early and written afterwards by the kernel ahead is
// updated there, and a prefetch returns nothing a thread could use stale).
// With PrefillParams::l2_prefetch a block reads its first tile's lengths early (L2OnlyReads: the
// same words are read again after the wait), then prefetches the tile's Q rows and the first
// l2_prefetch_keys keys of its K and V. Where the grid leaves room for the next launch's blocks
// (the planner's rule: non-persistent grids of at most half the resident block slots, such as the
// decode route's), those blocks are resident while the kernel ahead runs, and their first TMA
// loads after the wait then come from L2.
// A length or page id read early may be one the kernel ahead is about to change: that only aims
// the prefetch at other lines, never outside the tensors (a tile whose early lengths are invalid
// prefetches nothing, page ids outside the pool are skipped).
#pragma once

#include "kernels/common/l2_prefetch_lines.cuh"
#include "kernels/prefill/prefill_common.cuh"
#include "kernels/prefill_sm90/tile_schedule.cuh"

namespace splitkv::detail {

// Called by every thread of the block before wait_for_prior_grids.
template <class Traits>
__device__ __forceinline__ void prefetch_first_tile_to_l2(const PrefillParams& p, const TileSchedule<Traits::kPackGqa>& schedule) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename Traits::Element;
  constexpr int kRowBytes = int(sizeof(Element)) * Traits::kHeadDim;  // a Q, K or V row of one head
  if (!p.l2_prefetch) return;
  const int tile = TileSchedule<Traits::kPackGqa>::first_tile();
  if (tile >= schedule.total_tiles) return;
  PrefillBlock<Element> blk;
  if (!TileSchedule<Traits::kPackGqa>::locate(blk, p, tile, Traits::kBlockM, Traits::kBlockN, L2OnlyReads{})) return;
  if (blk.seq.bad) return;
  const int tid = int(threadIdx.x);
  const TileRows<Traits::kPackGqa> rows = TileSchedule<Traits::kPackGqa>::rows(blk, p);
  const Element* q_seq = static_cast<const Element*>(p.q) + blk.b * p.q_batch_stride + blk.seq.q_begin * p.q_token_stride;
  for (int r = tid; r < Traits::kBlockM; r += Traits::kThreads) {
    if (!rows.holds(r, blk.seq.q_len)) continue;
    prefetch_lines_to_l2(q_seq + rows.query(r) * p.q_token_stride + rows.head(r) * p.q_head_stride, kRowBytes);
  }
  const int hi = min(blk.keys.hi, blk.keys.lo + p.l2_prefetch_keys);
  for (int t = blk.keys.lo + tid; t < hi; t += Traits::kThreads) {
    int64_t k_row = t * p.k_token_stride, v_row = t * p.v_token_stride;  // token tensors or a contiguous cache
    if (p.block_table != nullptr) {
      const int32_t page = __ldcg(p.block_table + blk.b * p.block_table_stride + t / p.page_size);
      if (page < 0 || page >= p.num_pages) continue;
      const int slot = t % p.page_size;
      k_row = page * p.k_batch_stride + slot * p.k_token_stride;
      v_row = page * p.v_batch_stride + slot * p.v_token_stride;
    }
    prefetch_lines_to_l2(blk.k_base + k_row, kRowBytes);
    prefetch_lines_to_l2(blk.v_base + v_row, kRowBytes);
  }
#endif
}

}  // namespace splitkv::detail
