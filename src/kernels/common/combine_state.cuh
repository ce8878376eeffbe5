// Merging split partials (O_i, LSE_i) into one row, four output columns per thread:
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) * O_i
// as an online (max, sum, acc) state folded in a fixed order. Used by the combine kernel (and the
// fused and peer merges that share its row code), the in-cluster combine of the decode kernel and
// the atomic combine's normalization.
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

// Partials are folded in index order, kMergeBatch at a time: the one order of every deterministic
// merge (combine kernel, fused combine, peer merge, cluster merge), so all give the same bits for
// the same partials. Appending empty partials (LSE = -inf, O = 0) changes no bit.
constexpr int kMergeBatch = 4;
// Partials loaded before the first of them is folded: up to 8 splits cost one load latency (the
// combine kernel's first version folded one split per load and cost ~8 µs at 32 splits, run 1).
constexpr int kMergeLoads = 8;

// Merges partials 0..n-1 of one row's four columns; at(s, lse, o) loads partial s. Writes the
// normalized O to out and returns the LSE; nan_seen says whether any partial's LSE was NaN (a
// poisoned split, which must poison the row even beside empty ones).
template <class At>
__device__ __forceinline__ float merge_partials_in_order(int n, const At& at, float (&out)[4], bool& nan_seen) {
  CombineState state;
  for (int s0 = 0; s0 < n; s0 += kMergeLoads) {
    float lse[kMergeLoads];
    float4 o[kMergeLoads];
#pragma unroll
    for (int j = 0; j < kMergeLoads; ++j) {
      lse[j] = kNegInf;
      o[j] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (s0 + j < n) at(s0 + j, lse[j], o[j]);
      nan_seen |= isnan(lse[j]);
    }
#pragma unroll
    for (int b = 0; b < kMergeLoads; b += kMergeBatch) {
      if (s0 + b >= n) break;
      float batch_lse[kMergeBatch];
      float4 batch_o[kMergeBatch];
#pragma unroll
      for (int j = 0; j < kMergeBatch; ++j) batch_lse[j] = lse[b + j], batch_o[j] = o[b + j];
      state.fold(batch_lse, batch_o);
    }
  }
  return state.finish(out);
}

}  // namespace splitkv::detail
