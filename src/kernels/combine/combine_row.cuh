// One output row of the split-KV combine, over partials wherever they live: the combine kernel's
// (one array of splits), the fused combine's and splitkv::dist's peer merge (each rank's splits in
// its own window) share this code, so all give the same bits for the same partials in the same
// split order.
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) * O_i
// A row is merged by head_dim / 4 threads, one float4 of every partial row each, with no shared
// memory and no barrier: every thread reads all of the row's LSEs, so each owns the whole
// computation of its four columns (a block of tiles::kCombineThreads merges several rows at once).
// The split order is fixed (kernels/common/combine_state.cuh), so results are bitwise identical
// run to run and to the cluster merge's, and appending empty partials (LSE = -inf) changes no bit
// (batch-invariant mode relies on that).
#pragma once

#include "kernels/combine/combine_params.hpp"
#include "kernels/common/combine_state.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/tile_table.hpp"

namespace splitkv::detail {

// Partials as one array of splits: CombineParams' partial_o [splits, rows, D] / partial_lse [splits, rows].
// kFromL2: read past L1 (ld.cg), for partials other blocks of the same launch wrote (the fused
// combine); the values, and so the merged bits, are the same either way.
template <int kHeadDim, bool kFromL2 = false>
struct ContiguousPartials {
  const float* o;
  const float* lse_of;
  int64_t rows;
  __device__ float lse(int s, int64_t row) const {
    const float* at = lse_of + int64_t(s) * rows + row;
    return kFromL2 ? __ldcg(at) : *at;
  }
  __device__ float4 o4(int s, int64_t row, int lane) const {
    const float4* at = reinterpret_cast<const float4*>(o + (int64_t(s) * rows + row) * kHeadDim) + lane;
    return kFromL2 ? __ldcg(at) : *at;
  }
};

// The threads that merge one row, and the rows a block of tiles::kCombineThreads merges at once.
template <int kHeadDim>
struct CombineLanes {
  static constexpr int kPerRow = kHeadDim / 4;
  static constexpr int kRowsPerBlock = tiles::combine_rows_per_block(kHeadDim);
  static_assert(kRowsPerBlock * kPerRow == tiles::kCombineThreads);
};

// Merges the p.num_splits partials of `row`, columns [4 * lane, 4 * lane + 4), in split order
// (merge_partials_in_order), and writes them through p.output (the thread of lane 0 also writes the
// LSE). Each of the row's head_dim / 4 threads calls it with its own lane; threads of other rows
// may call it at the same time.
template <class Element, int kHeadDim, class Partials>
__device__ __forceinline__ void combine_row(const CombineParams& p, int64_t row, int lane, const Partials& partials) {
  const int hq = int(row % p.num_q_heads);
  const int i = int(row / p.num_q_heads % p.seq_rows);
  const int b = int(row / p.num_q_heads / p.seq_rows);
  int64_t token = i;
  if (p.cu_seqlens_q != nullptr) {
    if (i >= p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b]) return;  // a padding row of a shorter sequence
    token += p.cu_seqlens_q[b];
  }
  bool nan_seen = false;
  float out[4];
  const float lse = merge_partials_in_order(
      p.num_splits,
      [&](int s, float& lse_s, float4& o_s) {
        lse_s = partials.lse(s, row);
        o_s = partials.o4(s, row, lane);
      },
      out, nan_seen);
  write_output<Element, kHeadDim>(p.output, OutputRow{b, i, token, hq, 0}, lane * 4, out, lse, lane == 0, nan_seen);
}

}  // namespace splitkv::detail
