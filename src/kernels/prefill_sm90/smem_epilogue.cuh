// The sm_90a prefill epilogue for final rows: a consumer warpgroup writes its normalized O tile
// (64 rows x D) as the Q/O dtype into its own rows of the Q tile in shared memory, then one thread
// stores them with one TMA copy where O is a plain box (padded queries: every sequence has max_q_len
// rows and the copy drops rows past them), or the warpgroup copies the rows out in 16-byte chunks,
// consecutive threads along a row (varlen queries, whose next sequence starts right after the rows).
//
// Why: the common epilogue (RowWriter) stores each thread's column pairs straight from the wgmma
// accumulator, one 4-byte store with its own address and output-mode test per pair. Unrolled over
// 64 rows x D columns that is ~3000 straight-line instructions that run once per block, so every
// block fetched them cold: an Nsight Compute source profile of the 1k x 1k D=128 row put ~17% of
// the kernel's warp samples there, mostly waiting for instructions (docs/TUNING.md, "Kernels"). Here a
// thread issues D/16 stmatrix and 64 * D / 8 / 128 16-byte loads and global stores.
//
// The consumer's Q rows are free: its last Q K^T has retired before the epilogue (the loop waits for
// every product), and each consumer's 64 rows are whole 8-row swizzle atoms no other warpgroup reads.
// Partial (split-KV) and atomic rows are fp32 and keep the common epilogue.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/common/epilogue.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/prefill_common.cuh"

namespace splitkv::detail {

// O as a TMA store sees it: (tokens, D, Hq, batch slots), padded queries only (see launch).
template <class Traits>
struct TmaStoreO {
  typename Traits::TmaO tma;
  typename Traits::GmemShape shape;
  bool enabled;  // else the warpgroup copies its rows out
};

// threadIdx.x read where it is used: the compiler cannot move a volatile read out of the tile loop.
// The epilogue's per-thread offsets (stmatrix and 16-byte chunk addresses, ~40 words at D=256)
// depend on the thread index alone, so, derived from the caller's index, ptxas computed them once
// at the kernel's start and, where registers are short, spilled them across the whole key loop;
// beside 227 KB of shared memory the L1 does not keep 256 threads' spills for a tile, and the
// copy-out reloaded them chunk by chunk from L2. Read here, they are computed where they are used
// (docs/TUNING.md, "Kernels"). The D=128
// tile (8 chunks per thread, 240 registers, nothing spilled) lost 11% at 1k that way, for reasons
// not found, so tiles without that pressure keep the caller's index.
template <class Traits>
constexpr bool kEpilogueReadsThreadIndex = Traits::kHeadDim > 128 || Traits::kConsumerRegisters < 240;

__device__ __forceinline__ int thread_index_here() {
  uint32_t tid;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  return int(tid);
}

// rows: the (query head, query) of each tile row (a packed tile's rows go to several heads, so it
// always copies out); sQ: the block's (M, D) Q tile; acc_o: the consumer's fp32 O accumulator (wgmma C layout) and
// coords its block-local (row, col) as a (rows, cols) view; lse/inv per accumulator row;
// consumer: the warpgroup's index among the consumers (warpgroup 1 + consumer of the block);
// consumer_tid: the thread's index among all consumer threads; barrier_id: a named barrier of this
// warpgroup.
template <class Traits, class SmemQ, class Acc, class Coords, int kRows, bool kPacked>
__device__ __forceinline__ void write_final_rows_through_smem(const PrefillParams& p, const TmaStoreO<Traits>& store,
                                                              const PrefillSequence& seq, int b,
                                                              const TileRows<kPacked>& rows, int consumer,
                                                              int caller_consumer_tid,
                                                              SmemQ sQ, const Acc& acc_o, const Coords& coords,
                                                              const float (&lse)[kRows], const float (&inv)[kRows],
                                                              uint32_t barrier_id) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row (contiguous under the 128-byte swizzle)
  const OutputParams& o = p.output;
  const int consumer_tid =  // consumers are warpgroups 1, 2, ...
      kEpilogueReadsThreadIndex<Traits> ? thread_index_here() - 128 : caller_consumer_tid;
  const int tid = consumer_tid % 128;

  // Normalize and convert in the accumulator's layout, then stmatrix 8 x 8 blocks into shared memory.
  Tensor acc_rc = make_tensor(acc_o.data(), wgmma_acc_as_rows_cols(acc_o.layout()));  // (rows, cols)
  Tensor rO = make_tensor<Element>(acc_o.layout());
  Tensor rO_rc = make_tensor(rO.data(), wgmma_acc_as_rows_cols(rO.layout()));  // (rows, cols)
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    // A bad tile's rows are NaN through their factor (x * NaN is NaN for every x): one select per row
    // instead of one per element (which cost 70 FSEL per thread and tile at D=128).
    const float row_inv = seq.bad ? kOutputNaN : inv[r];
    CUTE_UNROLL
    for (int c = 0; c < size<1>(acc_rc); ++c) rO_rc(r, c) = Element(acc_rc(r, c) * row_inv);
    const int local = get<0>(coords(r, 0));
    if (o.lse != nullptr && tid % 4 == 0 && rows.holds(local, seq.q_len)) {  // the quad's first thread holds column 0
      final_lse(o, b, rows.head(local), seq.q_begin + rows.query(local)) = seq.bad ? kOutputNaN : lse[r];
    }
  }
  auto stmatrix = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, typename Traits::TiledMmaPV{});
  auto thr_stmatrix = stmatrix.get_thread_slice(consumer_tid);
  copy(stmatrix, thr_stmatrix.retile_S(rO), thr_stmatrix.partition_D(sQ));
  constexpr int kRowsOut = Traits::kConsumerRows;
  if (!kPacked && store.enabled) {
    cutlass::arch::fence_view_async_shared();  // this thread's rows, visible to the TMA unit
    cutlass::arch::NamedBarrier::sync(128, barrier_id);
    if (tid == 0) {
      Tensor mO = store.tma.get_tma_tensor(store.shape)(_, _, rows.hq0, b);  // (tokens, D)
      Tensor gO = local_tile(mO, Shape<Int<kRowsOut>, Int<D>>{}, make_coord(rows.row0 / kRowsOut + consumer, _0{}));
      Tensor sO = local_tile(sQ, Shape<Int<kRowsOut>, Int<D>>{}, make_coord(consumer, _0{}));  // (64, D)
      auto [tOgO, tOsO] =
          tma_partition(store.tma, _0{}, Layout<_1>{}, group_modes<0, 2>(sO), group_modes<0, 2>(gO));
      copy(store.tma, tOsO, tOgO);
      tma_store_arrive();  // the caller waits for the read (tma_store_wait) before the buffer takes another Q
    }
    return;
  }
  cutlass::arch::NamedBarrier::sync(128, barrier_id);

  // Rows out, 16 bytes per thread and step, consecutive threads along a row.
  Element* out = final_row<Element>(o, b, rows.hq0, seq.q_begin);  // the sequence's first query row (one head)
  const int first_row = consumer * kRowsOut;
  CUTE_UNROLL
  for (int idx = tid; idx < kRowsOut * kChunks; idx += 128) {
    const int row = first_row + idx / kChunks, col = idx % kChunks * 8;
    if (rows.holds(row, seq.q_len)) {
      uint4 chunk;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(chunk.x), "=r"(chunk.y), "=r"(chunk.z), "=r"(chunk.w)
                   : "r"(cast_smem_ptr_to_uint(raw_pointer_cast(&sQ(row, col)))));
      Element* dst = kPacked ? final_row<Element>(o, b, rows.head(row), seq.q_begin + rows.query(row))
                             : out + rows.query(row) * o.o_token_stride;
      *reinterpret_cast<uint4*>(dst + col) = chunk;
    }
  }
}

}  // namespace splitkv::detail
