// The end of the opt-in atomic combine (OutputMode::kAtomic): each row's atomically accumulated
// part, sum_i w_i * O_i and sum_i w_i with w_i = exp(LSE_i - reference), is one more partial with
// LSE = reference + log(sum w_i); the splits that fell back (far from the reference, or poisoned)
// left ordinary partials, the others LSE -inf. This kernel merges the two and writes the final row,
// then zeroes the row's accumulators for the next launch (graph replays need no memset).
// Nondeterministic: the atomic adds arrive in any order.
//
// D/4 threads per row (a float4 of columns each), 128 / (D/4) rows per block.
#pragma once

#include "kernels/combine/atomic_normalize_params.hpp"
#include "kernels/common/combine_state.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/pdl.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim>
__global__ void __launch_bounds__(kAtomicNormalizeThreads)
    atomic_normalize_kernel(const __grid_constant__ AtomicNormalizeParams p) {
  constexpr int kLanesPerRow = kHeadDim / 4;
  constexpr int kRowsPerBlock = kAtomicNormalizeThreads / kLanesPerRow;
  wait_for_prior_grids();  // the split kernel's adds and partials
  allow_dependent_launch();
  const CombineParams& c = p.combine;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanesPerRow;
  const int lane = threadIdx.x % kLanesPerRow;
  if (row >= c.rows) return;

  float4* acc = reinterpret_cast<float4*>(p.atomic_o + row * kHeadDim) + lane;
  const float sum = p.atomic_sum[row];
  CombineState state;
  if (sum > 0.f) {
    const float inv = 1.f / sum;
    const float4 a = *acc;
    const float lse1[1] = {p.reference_lse + logf(sum)};
    const float4 o1[1] = {make_float4(a.x * inv, a.y * inv, a.z * inv, a.w * inv)};
    state.fold(lse1, o1);
  }
  bool nan_seen = false;
  for (int s = 0; s < c.num_splits; ++s) {
    const float lse = c.partial_lse[int64_t(s) * c.rows + row];
    if (lse == kNegInf) continue;  // added atomically, or empty: its O slot is not read
    nan_seen |= isnan(lse);
    const float lse1[1] = {lse};
    const float4 o1[1] = {reinterpret_cast<const float4*>(c.partial_o + (int64_t(s) * c.rows + row) * kHeadDim)[lane]};
    state.fold(lse1, o1);
  }
  *acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (lane == 0) p.atomic_sum[row] = 0.f;

  float out[4];
  const float lse = state.finish(out);
  const int hq = int(row % c.num_q_heads);
  const int i = int(row / c.num_q_heads % c.seq_rows);
  const int b = int(row / c.num_q_heads / c.seq_rows);
  write_output<Element, kHeadDim>(c.output, OutputRow{b, i, i, hq, 0}, lane * 4, out, lse, lane == 0, nan_seen);
}

}  // namespace splitkv::detail
