// One output row of the split-KV combine, over partials wherever they live: the combine kernel's
// (one array of splits) and splitkv::dist's peer merge (each rank's splits in its own window)
// share this code, so both give the same bits for the same partials in the same split order.
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) * O_i
// The block's threads form groups of head_dim / 4 (one float4 of a partial row each); group g
// folds splits g, g + groups, ... into an online (max, sum, acc) state, several partials in flight
// at once, and the groups' states are merged in group order. Every step has a fixed order, so
// results are bitwise identical run to run, and appending empty partials (LSE = -inf) changes no
// bit (batch-invariant mode relies on that).
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

// Merges the p.num_splits partials of `row` and writes it through p.output. Every thread of the
// block (tiles::kCombineThreads) must call it; it contains two __syncthreads, and only group 0 is
// still reading its shared arrays when the others return: a caller that merges another row next
// must put a __syncthreads in between.
template <class Element, int kHeadDim, class Partials>
__device__ __forceinline__ void combine_row(const CombineParams& p, int64_t row, const Partials& partials) {
  constexpr int kLanesPerRow = kHeadDim / 4;
  constexpr int kGroups = tiles::kCombineThreads / kLanesPerRow;
  constexpr int kInFlight = 4;  // partials each thread loads before folding them in
  static_assert(tiles::kCombineThreads % kLanesPerRow == 0);
  __shared__ float group_max[kGroups], group_sum[kGroups];
  __shared__ float4 group_acc[kGroups][kLanesPerRow];
  __shared__ int saw_nan;

  const int group = threadIdx.x / kLanesPerRow, lane = threadIdx.x % kLanesPerRow;
  if (threadIdx.x == 0) saw_nan = 0;
  __syncthreads();  // saw_nan is reset before any group can set it

  const int hq = int(row % p.num_q_heads);
  const int i = int(row / p.num_q_heads % p.seq_rows);
  const int b = int(row / p.num_q_heads / p.seq_rows);
  int64_t token = i;
  if (p.cu_seqlens_q != nullptr) {
    if (i >= p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b]) return;  // block-uniform
    token += p.cu_seqlens_q[b];
  }

  CombineState state;
  bool nan_seen = false;  // a poisoned partial (bad input) must poison the row, even beside empties
  for (int s0 = group; s0 < p.num_splits; s0 += kGroups * kInFlight) {
    float lse[kInFlight];
    float4 o[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int s = s0 + j * kGroups;
      const bool valid = s < p.num_splits;
      lse[j] = valid ? partials.lse(s, row) : kNegInf;
      o[j] = valid ? partials.o4(s, row, lane) : make_float4(0.f, 0.f, 0.f, 0.f);
      nan_seen |= isnan(lse[j]);
    }
    state.fold(lse, o);
  }
  if (lane == 0) {
    group_max[group] = state.max;
    group_sum[group] = state.sum;
  }
  group_acc[group][lane] = make_float4(state.acc[0], state.acc[1], state.acc[2], state.acc[3]);
  if (nan_seen) saw_nan = 1;
  __syncthreads();
  if (group != 0) return;

  CombineState total;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {  // group order: deterministic
    CombineState group_state;
    group_state.max = group_max[g];
    group_state.sum = group_sum[g];
    const float4 acc = group_acc[g][lane];
    group_state.acc[0] = acc.x, group_state.acc[1] = acc.y, group_state.acc[2] = acc.z, group_state.acc[3] = acc.w;
    float group_out[4];
    const float lse1[1] = {group_state.finish(group_out)};
    const float4 o1[1] = {make_float4(group_out[0], group_out[1], group_out[2], group_out[3])};
    total.fold(lse1, o1);
  }
  float out[4];
  const float lse = total.finish(out);
  write_output<Element, kHeadDim>(p.output, OutputRow{b, i, token, hq, 0}, lane * 4, out, lse, lane == 0,
                                  saw_nan != 0);
}

}  // namespace splitkv::detail
