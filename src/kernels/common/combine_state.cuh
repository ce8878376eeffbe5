// Merging split partials (O_i, LSE_i) into one row, four output columns per thread:
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) * O_i
// as an online (max, sum, acc) state folded in a fixed order. Used by the combine kernel and by the
// in-cluster combine of the decode kernel.
#pragma once

#include "kernels/common/online_softmax.cuh"

namespace splitkv::detail {

// Online merge state of one thread's four output columns.
struct CombineState {
  float max = kNegInf;  // natural-log units
  float sum = 0.f;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};

  // Folds in n partials with LSEs lse[] and outputs o[] (n is a compile-time batch).
  template <int n>
  __device__ __forceinline__ void fold(const float (&lse)[n], const float4 (&o)[n]) {
    float new_max = max;
#pragma unroll
    for (int j = 0; j < n; ++j) new_max = fmaxf(new_max, lse[j]);
    if (new_max == kNegInf) return;  // all empty so far
    const float rescale = exp2f((max - new_max) * kLog2e);  // 0 when max was -inf
    sum *= rescale;
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[c] *= rescale;
#pragma unroll
    for (int j = 0; j < n; ++j) {
      const float w = exp2f((lse[j] - new_max) * kLog2e);
      sum += w;
      acc[0] += w * o[j].x;
      acc[1] += w * o[j].y;
      acc[2] += w * o[j].z;
      acc[3] += w * o[j].w;
    }
    max = new_max;
  }

  // Natural-log LSE and normalized output of everything folded so far (-inf and zeros if empty).
  __device__ __forceinline__ float finish(float (&out)[4]) const {
    if (isnan(sum)) {
      out[0] = out[1] = out[2] = out[3] = sum;
      return sum;
    }
    if (!(sum > 0.f)) {
      out[0] = out[1] = out[2] = out[3] = 0.f;
      return kNegInf;
    }
    const float inv = 1.f / sum;
#pragma unroll
    for (int c = 0; c < 4; ++c) out[c] = acc[c] * inv;
    return max + logf(sum);
  }
};

}  // namespace splitkv::detail
