// Merging split partials (O_i, LSE_i) into one row, four output columns per thread:
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) * O_i
// as an online (max, sum, acc) state folded in a fixed order. Used by the combine kernel (and the
// fused and peer merges that share its row code), the in-cluster combine of the decode kernel and
// the atomic combine's normalization.
#pragma once

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/merge_chunks.hpp"

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

  // Folds in another state (its own max, sum and unnormalized acc), as if its partials came next.
  // Into an empty state it copies, so a single chunk's bits are the chunk's own fold.
  __device__ __forceinline__ void merge(const CombineState& other) {
    if (other.max == kNegInf) return;  // nothing in it (a NaN partial is reported by nan_seen)
    if (max == kNegInf) {
      *this = other;
      return;
    }
    const float new_max = fmaxf(max, other.max);
    const float mine = exp2f((max - new_max) * kLog2e);
    const float theirs = exp2f((other.max - new_max) * kLog2e);
    sum = sum * mine + other.sum * theirs;
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[c] = acc[c] * mine + other.acc[c] * theirs;
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

// The one order of every deterministic merge (combine kernel, fused combine, peer merge, cluster
// merge), so all give the same bits for the same partials: the partials are cut into chunks of
// kMergeChunk consecutive splits; each chunk is folded into a fresh state in index order,
// kMergeBatch at a time; the chunks' states are merged in chunk order. A chunk's loads are issued
// before the first of them is folded, so one chunk costs one load latency (folding one split per
// load costs one latency per split (docs/TUNING.md, "Kernels")), and the combine kernel can
// fold a row's chunks in parallel, one team of threads each (combine_row_in_groups). Appending
// empty partials (LSE = -inf, O = 0) changes no bit.
constexpr int kMergeBatch = 4;
constexpr int kMergeChunk = tiles::kCombineChunk;

// Folds partials [kMergeChunk * chunk, kMergeChunk * chunk + kMergeChunk) below n into a fresh
// state; at(s, lse, o) loads partial s. nan_seen: set when a partial's LSE is NaN (a poisoned
// split, which must poison the row even beside empty ones).
template <class At>
__device__ __forceinline__ CombineState fold_chunk(int n, int chunk, const At& at, bool& nan_seen) {
  CombineState state;
  const int s0 = chunk * kMergeChunk;
  float lse[kMergeChunk];
  float4 o[kMergeChunk];
#pragma unroll
  for (int j = 0; j < kMergeChunk; ++j) {
    lse[j] = kNegInf;
    o[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (s0 + j < n) at(s0 + j, lse[j], o[j]);
    nan_seen |= isnan(lse[j]);
  }
#pragma unroll
  for (int b = 0; b < kMergeChunk; b += kMergeBatch) {
    if (s0 + b >= n) break;
    float batch_lse[kMergeBatch];
    float4 batch_o[kMergeBatch];
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) batch_lse[j] = lse[b + j], batch_o[j] = o[b + j];
    state.fold(batch_lse, batch_o);
  }
  return state;
}

// Merges chunks [first, last) of partials 0..n-1 into total, in chunk order: the tail of the order
// above from chunk `first` on, for a merge that loads its chunks in rounds (the fused combine).
template <class At>
__device__ __forceinline__ void merge_chunks(CombineState& total, int n, int first, int last, const At& at,
                                             bool& nan_seen) {
  for (int chunk = first; chunk < last; ++chunk) total.merge(fold_chunk(n, chunk, at, nan_seen));
}

// Merges partials 0..n-1 of one row's four columns in the order above, by one thread. Writes the
// normalized O to out and returns the LSE. One chunk's fold is the result (the same bits as merging
// it into an empty state); kOneChunk: the caller knows n <= kMergeChunk, so no code for a second
// state is compiled (it would spill the combine kernel's 64 registers).
template <bool kOneChunk = false, class At>
__device__ __forceinline__ float merge_partials_in_order(int n, const At& at, float (&out)[4], bool& nan_seen) {
  if (kOneChunk || n <= kMergeChunk) return fold_chunk(n, 0, at, nan_seen).finish(out);
  CombineState total;
  merge_chunks(total, n, 0, tiles::combine_chunks(n), at, nan_seen);
  return total.finish(out);
}

}  // namespace splitkv::detail
