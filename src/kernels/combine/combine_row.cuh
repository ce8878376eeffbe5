// One output row of the split-KV combine, over partials wherever they live: the combine kernel's
// (one array of splits) and splitkv::dist's peer merge (each rank's splits in its own window) share
// this code, and the fused combine (kernels/decode/fused_merge.cuh) its merge order, so all give
// the same bits for the same partials in the same split order.
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) * O_i
// A row is merged by head_dim / 4 threads, one float4 of every partial row each: every thread
// reads all of the row's LSEs, so each owns the whole computation of its four columns. With many
// splits the combine kernel gives a row several such teams, each folding its own chunks of 8
// splits, and merges the teams' states through shared memory in chunk order
// (combine_row_in_groups). The order is fixed (kernels/common/combine_state.cuh), so results are
// bitwise identical run to run, team count to team count and to the cluster merge's, and
// appending empty partials (LSE = -inf) changes no bit (batch-invariant mode relies on that).
#pragma once

#include "kernels/combine/combine_params.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/combine_state.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/varlen_rows.hpp"
#include "kernels/combine/combine_tile.hpp"

namespace splitkv::detail {

// Partials as one array of splits: CombineParams' partial_o [splits, rows, D] / partial_lse [splits, rows].
// kCallerPartials (run_combine): an empty partial (LSE = -inf) may hold anything in its O (NaN, Inf);
// its O is read as zeros, so that its weight of 0 keeps it out of the row (0 x NaN would not). The
// splitkv kernels' own empty partials hold zeros, so their merges skip this.
template <int kHeadDim, bool kCallerPartials = false>
struct ContiguousPartials {
  static constexpr bool kZeroEmptyOutputs = kCallerPartials;
  const float* o;
  const float* lse_of;
  int64_t rows;
  __device__ float lse(int s, int64_t row) const { return lse_of[int64_t(s) * rows + row]; }
  __device__ float4 o4(int s, int64_t row, int lane) const {
    return reinterpret_cast<const float4*>(o + (int64_t(s) * rows + row) * kHeadDim)[lane];
  }
};

// Partial s of `row` through `partials`, an empty one's O as zeros where the partials ask for it.
template <class Partials>
__device__ __forceinline__ void load_partial(const Partials& partials, int s, int64_t row, int lane, float& lse_s,
                                             float4& o_s) {
  lse_s = partials.lse(s, row);
  o_s = partials.o4(s, row, lane);
  if constexpr (Partials::kZeroEmptyOutputs) {
    if (lse_s == kNegInf) o_s = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// The threads that merge one row, and the rows a block of tiles::kCombineThreads merges at once.
template <int kHeadDim>
struct CombineLanes {
  static constexpr int kPerRow = kHeadDim / 4;
  static constexpr int kRowsPerBlock = tiles::combine_rows_per_block(kHeadDim);
  static_assert(kRowsPerBlock * kPerRow == tiles::kCombineThreads);
};

// Where `row`'s merged output goes; false for a padding row of a shorter sequence (varlen).
__device__ __forceinline__ bool combine_destination(const CombineParams& p, int64_t row, OutputRow& where) {
  const int hq = int(row % p.num_q_heads);
  const int i = int(row / p.num_q_heads % p.seq_rows);
  const int b = int(row / p.num_q_heads / p.seq_rows);
  int64_t token = i;
  if (p.cu_seqlens_q != nullptr) {  // the prefill kernels' rows (varlen_rows): never outside [0, total_q)
    const VarlenRows rows = varlen_rows(p.cu_seqlens_q, b, p.total_q, p.seq_rows);
    if (i >= rows.len) return false;
    token += rows.begin;
  }
  where = OutputRow{b, i, token, hq, 0};
  return true;
}

// kSinks: the row's head's sink logit joins the merged row once (fold_sink: LSE' = log(exp(LSE) +
// exp(sink)), O' = O exp(LSE - LSE')).
template <bool kSinks>
__device__ __forceinline__ void fold_row_sink(const CombineParams& p, const OutputRow& where, float& lse,
                                              float (&out)[4]) {
  if constexpr (kSinks) {
    const float weight = fold_sink(p.sinks[where.head * p.sinks_stride], &lse);
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] *= weight;
  }
}

// Merges the p.num_splits partials of `row`, columns [4 * lane, 4 * lane + 4), in split order
// (merge_partials_in_order), and writes them through p.output (the thread of lane 0 also writes the
// LSE). Each of the row's head_dim / 4 threads calls it with its own lane; threads of other rows
// may call it at the same time. kOneChunk: p.num_splits <= kMergeChunk.
template <class Element, int kHeadDim, bool kOneChunk = false, bool kSinks = false, class Partials>
__device__ __forceinline__ void combine_row(const CombineParams& p, int64_t row, int lane, const Partials& partials) {
  OutputRow where;
  if (!combine_destination(p, row, where)) return;
  bool nan_seen = false;
  float out[4];
  float lse = merge_partials_in_order<kOneChunk>(
      p.num_splits,
      [&](int s, float& lse_s, float4& o_s) { load_partial(partials, s, row, lane, lse_s, o_s); },
      out, nan_seen);
  fold_row_sink<kSinks>(p, where, lse, out);
  write_output<Element, kHeadDim>(p.output, where, lane * 4, out, lse, lane == 0, nan_seen);
}

// One team's fold of one chunk, handed to team 0 through shared memory.
struct ChunkSlot {
  CombineState state;
  bool nan_seen = false;
};

// combine_row by p.split_groups teams of head_dim / 4 threads: in each round team g folds chunk
// c0 + g (fold_chunk) and team 0 merges the round's chunk states in chunk order, so the bits are
// merge_partials_in_order's. Has barriers: every thread of the block calls it, those of padding
// rows included. exchange: the row's slots, [split_groups][head_dim / 4].
template <class Element, int kHeadDim, bool kSinks = false, class Partials>
__device__ __forceinline__ void combine_row_in_groups(const CombineParams& p, int64_t row, int lane, int group,
                                                      ChunkSlot* exchange, const Partials& partials) {
  constexpr int kPerRow = CombineLanes<kHeadDim>::kPerRow;
  OutputRow where{};
  const bool live = combine_destination(p, row, where);
  const auto at = [&](int s, float& lse_s, float4& o_s) { load_partial(partials, s, row, lane, lse_s, o_s); };
  const int chunks = tiles::combine_chunks(p.num_splits);
  CombineState total;
  bool nan_seen = false;
  for (int c0 = 0; c0 < chunks; c0 += p.split_groups) {
    ChunkSlot mine;
    if (live && c0 + group < chunks) mine.state = fold_chunk(p.num_splits, c0 + group, at, mine.nan_seen);
    exchange[group * kPerRow + lane] = mine;
    __syncthreads();
    if (group == 0) {
      for (int g = 0; g < p.split_groups; ++g) {
        total.merge(exchange[g * kPerRow + lane].state);
        nan_seen |= exchange[g * kPerRow + lane].nan_seen;
      }
    }
    __syncthreads();  // the slots are refilled next round
  }
  if (!live || group != 0) return;
  float out[4];
  float lse = total.finish(out);
  fold_row_sink<kSinks>(p, where, lse, out);
  write_output<Element, kHeadDim>(p.output, where, lane * 4, out, lse, lane == 0, nan_seen);
}

}  // namespace splitkv::detail
