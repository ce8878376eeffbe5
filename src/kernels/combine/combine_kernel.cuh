// The split-KV combine: one warp per output row merges num_splits partials (O_i, LSE_i) as
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) * O_i
// with the O sum taken in split order, so results are bitwise identical run to run.
#pragma once

#include <cutlass/array.h>

#include "kernels/combine/combine_params.hpp"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/quad_reduce.cuh"

namespace splitkv::detail {

constexpr int kCombineWarps = 4;

template <class Element, int kHeadDim>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_kernel(const __grid_constant__ CombineParams p) {
  constexpr int kPerLane = kHeadDim / 32;  // 2, 4 or 8 consecutive columns per lane
  static_assert(kHeadDim % 64 == 0);
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kCombineWarps + threadIdx.x / 32;

  allow_dependent_launch();  // our own dependents may start launching; they wait for us anyway
  wait_for_prior_grids();    // the partials come from the kernel before us
  if (row >= p.rows) return;

  const int hq = int(row % p.num_q_heads);
  const int i = int(row / p.num_q_heads % p.seq_rows);
  const int b = int(row / p.num_q_heads / p.seq_rows);
  int64_t token = i;
  if (p.cu_seqlens_q != nullptr) {
    if (i >= p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b]) return;
    token += p.cu_seqlens_q[b];
  }

  // Total LSE: lanes take splits lane, lane + 32, ...; then a fixed butterfly across the warp.
  float max_lse = kNegInf;
  for (int s = lane; s < p.num_splits; s += 32) max_lse = fmaxf(max_lse, p.partial_lse[s * p.rows + row]);
  max_lse = warp_max(max_lse);
  float sum = 0.f;
  if (max_lse != kNegInf) {
    for (int s = lane; s < p.num_splits; s += 32) sum += exp2f((p.partial_lse[s * p.rows + row] - max_lse) * kLog2e);
  }
  sum = warp_sum(sum);
  const bool any_partial_nan = isnan(sum) || isnan(max_lse);
  const float lse = any_partial_nan ? __int_as_float(0x7fc00000)
                                    : (max_lse == kNegInf ? kNegInf : max_lse + logf(sum));

  float o[kPerLane] = {};
  if (lse != kNegInf) {
    const float* part = p.partial_o + row * kHeadDim + lane * kPerLane;
#pragma unroll 4
    for (int s = 0; s < p.num_splits; ++s) {
      const float weight = exp2f((p.partial_lse[s * p.rows + row] - lse) * kLog2e);
      const float* src = part + int64_t(s) * p.rows * kHeadDim;
#pragma unroll
      for (int j = 0; j < kPerLane; j += 2) {
        const float2 v = *reinterpret_cast<const float2*>(src + j);
        o[j] += weight * v.x;
        o[j + 1] += weight * v.y;
      }
    }
  }
  cutlass::Array<Element, kPerLane> packed;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) packed[j] = Element(any_partial_nan ? lse : o[j]);
  Element* out = static_cast<Element*>(p.out) + b * p.o_batch_stride + token * p.o_token_stride +
                 hq * p.o_head_stride + lane * kPerLane;
  *reinterpret_cast<cutlass::Array<Element, kPerLane>*>(out) = packed;
  if (p.lse != nullptr && lane == 0) {
    p.lse[b * p.lse_batch_stride + hq * p.lse_head_stride + token * p.lse_token_stride] = lse;
  }
}

}  // namespace splitkv::detail
