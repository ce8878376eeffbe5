// The fused combine: after a decode block wrote its split's partial rows, the tile's last split
// block to finish merges every split's partials of the tile's rows and writes the final rows, so no
// combine kernel is launched. The merge is the combine kernel's (kernels/common/combine_state.cuh:
// the same chunks, folds and order), so the bits are the same.
//
// The last block stages the partials in its shared memory first (its rings are free by then):
// every thread copies its own float4 of O of every split with cp.async, all at once, and the
// row's LSEs beside them, so a merge of up to kStagedSplits splits costs one L2 round trip (the
// first version read one chunk of 8 splits per round trip into registers). Opt-in, and slower
// than the combine kernel in a stream for reasons outside the merge (docs/ARCHITECTURE.md,
// docs/TUNING.md).
#pragma once

#include <cute/arch/copy_sm80.hpp>

#include "kernels/combine/combine_row.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/decode/decode_params.hpp"

namespace splitkv::detail {

// Partial rows staged in shared memory for one pass of rows: [kStagedSplits][kThreads] float4s of
// O (thread-major, so a split's loads are conflict free) and [kStagedSplits][kRowsPerPass] LSEs.
// kStagingBytes: the shared memory the block may overwrite.
template <int kHeadDim, int kThreads, int kStagingBytes>
struct StagedPartials {
  static constexpr int kPerRow = CombineLanes<kHeadDim>::kPerRow;
  static constexpr int kRowsPerPass = kThreads / kPerRow;
  static constexpr int kSplitBytes = kThreads * int(sizeof(float4)) + kRowsPerPass * int(sizeof(float));
  // Whole chunks, so each round folds whole chunks in the merge order.
  static constexpr int kStagedSplits = kStagingBytes / kSplitBytes / kMergeChunk * kMergeChunk;
  static_assert(kThreads % kPerRow == 0, "whole rows of combine_row's threads");
  static_assert(kStagedSplits >= kMergeChunk, "shared memory for one chunk of splits");

  float4* o;
  float* lse;
  int first;  // the split in slot 0

  __device__ explicit StagedPartials(char* smem)
      : o(reinterpret_cast<float4*>(smem)),
        lse(reinterpret_cast<float*>(smem + kStagedSplits * kThreads * sizeof(float4))) {}

  // Thread `tid` (row r of the pass, `lane` of the row) copies splits [first, first + count) of its
  // partial row `row` (the LSEs: lanes take turns). Asynchronous: stage_wait() before reading.
  __device__ void stage(const DecodeParams& p, int64_t row, int r, int lane, int tid, int from, int count) {
    first = from;
    const int64_t rows = p.output.partial_rows;
    for (int j = 0; j < count; ++j) {
      const float* src = p.output.partial_o + ((int64_t(from + j) * rows + row) * kHeadDim + lane * 4);
      // .cg: through L2 only; other blocks of this launch wrote these rows, and L1 is not coherent.
      cute::SM80_CP_ASYNC_CACHEGLOBAL<float4>::copy(*reinterpret_cast<const float4*>(src), o[j * kThreads + tid]);
    }
    cute::cp_async_fence();
    for (int j = lane; j < count; j += kPerRow) lse[j * kRowsPerPass + r] = __ldcg(p.output.partial_lse + int64_t(from + j) * rows + row);
  }

  static __device__ void stage_wait() {
    cute::cp_async_wait<0>();
    __syncthreads();
  }

  // The loader fold_chunk takes, for thread `tid` of row r of the pass.
  __device__ auto at(int r, int tid) const {
    return [this, r, tid](int s, float& lse_s, float4& o_s) {
      lse_s = lse[(s - first) * kRowsPerPass + r];
      o_s = o[(s - first) * kThreads + tid];
    };
  }
};

// Adds one to *counter and returns the old value, with release and acquire semantics at GPU scope:
// what this block wrote before a barrier is visible to the block that reads the counter after us,
// and what the blocks that counted before us wrote is visible to this block after a barrier. One
// thread's ordering instead of a sequentially consistent __threadfence() in every thread before and
// after the count, which measured faster (docs/TUNING.md, "Kernels").
__device__ __forceinline__ int arrive_acq_rel(int* counter) {
  int old;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
}

// Counts the block in on its tile's counter; the tile's last split block merges every split's
// partials of the tile's rows [row0, row0 + rows_here) into p.combined and resets the counter to
// zero for the next launch (graph replays need no memset; the next launch counts only after this
// one completed). staging: shared memory of kStagingBytes the block no longer needs.
template <class Element, int kHeadDim, int kThreads, int kStagingBytes>
__device__ __forceinline__ void merge_if_last_split(const DecodeParams& p, int64_t tile, int b, int kv_head, int row0,
                                                    int rows_here, char* staging) {
  using Staged = StagedPartials<kHeadDim, kThreads, kStagingBytes>;
  __shared__ int is_last;
  __syncthreads();  // every thread's partial rows are written, and it is done with the staging's memory
  if (threadIdx.x == 0) {
    is_last = arrive_acq_rel(p.tile_counters + tile) + 1 == p.num_splits.divisor;
    if (is_last) p.tile_counters[tile] = 0;
  }
  __syncthreads();
  if (!is_last) return;  // block-uniform

  const int n = p.num_splits.divisor;
  const int lane = threadIdx.x % Staged::kPerRow;
  const int r = threadIdx.x / Staged::kPerRow;
  Staged staged(staging);
  for (int pass = 0; pass < rows_here; pass += Staged::kRowsPerPass) {
    const bool live = pass + r < rows_here;
    OutputRow where{};  // the final row; with split 0, also its partials' row index
    if (live) {
      const PackedRow at = packed_row(p, kv_head, row0 + pass + r);
      where = OutputRow{b, at.query, at.query, at.head, 0};
    }
    const int64_t row = partial_row(p.output, where);
    CombineState total;
    bool nan_seen = false;
    for (int from = 0; from < n; from += Staged::kStagedSplits) {
      const int count = min(Staged::kStagedSplits, n - from);
      if (live) staged.stage(p, row, r, lane, threadIdx.x, from, count);
      Staged::stage_wait();
      if (live) {
        merge_chunks(total, n, from / kMergeChunk, tiles::combine_chunks(from + count), staged.at(r, threadIdx.x),
                     nan_seen);
      }
      __syncthreads();  // the slots are refilled next round
    }
    if (!live) continue;
    float out[4];
    const float lse = total.finish(out);
    write_output<Element, kHeadDim>(p.combined, where, lane * 4, out, lse, lane == 0, nan_seen);
  }
}

}  // namespace splitkv::detail
