// End of the decode block: its warps read disjoint keys, each with its own online-softmax state
// (row max, row sum, fp32 accumulator). They leave the states in shared memory and merge them in
// warp order (deterministic) into the block's result for each of its rows.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include "kernels/common/online_softmax.cuh"

namespace splitkv::detail {

// Shared-memory layout of the merge (overlays the KV rings, which are done by then).
template <int kWarps, int kM, int kHeadDim>
struct WarpMergeSmem {
  float* o;    // [warps][M][D]
  float* max;  // [warps][M] raw-score row max
  float* sum;  // [warps][M] row sum of exp2 relative to that max
  __device__ __forceinline__ explicit WarpMergeSmem(char* base) {
    o = reinterpret_cast<float*>(base);
    max = o + kWarps * kM * kHeadDim;
    sum = max + kWarps * kM;
  }
  // Bytes used; what follows is free for the caller.
  static constexpr int kBytes = (kWarps * kM * kHeadDim + 2 * kWarps * kM) * 4;
};

// Accumulator column c holds head-dim column c (the 16-bit kernel).
struct IdentityColumns {
  __device__ __forceinline__ int operator()(int c) const { return c; }
};

// Each warp stores its state: acc_o (MMA C fragment, (M, D)) and the rows' max / sum it holds.
// column_of maps an accumulator column to the head-dim column it holds (a kernel whose V operand
// permutes the columns says how).
template <int kM, int kHeadDim, class Smem, class ThrMma, class Acc, class RowCoords, class Softmax,
          class ColumnOf = IdentityColumns>
__device__ __forceinline__ void store_warp_state(const Smem& smem, int warp, int lane, const ThrMma& thr_mma,
                                                 const Acc& acc_o, const RowCoords& tScS_rc, const Softmax& softmax,
                                                 ColumnOf column_of = {}) {
  using namespace cute;
  Tensor sO = make_tensor(make_smem_ptr(smem.o + warp * kM * kHeadDim),
                          make_layout(Shape<Int<kM>, Int<kHeadDim>>{}, LayoutRight{}));  // (M, D) fp32
  if constexpr (std::is_same_v<ColumnOf, IdentityColumns>) {
    Tensor tOsO = thr_mma.partition_C(sO);
    copy(acc_o, tOsO);
  } else {
    Tensor tOcO = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kHeadDim>>{}));  // -> (row, col)
    CUTE_UNROLL
    for (int i = 0; i < size(acc_o); ++i) sO(get<0>(tOcO(i)), column_of(get<1>(tOcO(i)))) = acc_o(i);
  }
  if (lane % 4 == 0) {
    CUTE_UNROLL
    for (int r = 0; r < decltype(size<0>(tScS_rc))::value; ++r) {
      const int row = get<0>(tScS_rc(r, 0));
      smem.max[warp * kM + row] = softmax.row_max[r];
      smem.sum[warp * kM + row] = softmax.row_sum[r];
    }
  }
}

// After a barrier: merges the warps' states of row r, columns [c, c + 4): normalized output and
// natural-log LSE (zeros and -inf when no warp saw a key).
template <int kWarps, int kM, int kHeadDim, class Smem>
__device__ __forceinline__ float merge_warp_states(const Smem& smem, int r, int c, float scale_log2, float (&o)[4]) {
  float row_max = kNegInf;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) row_max = fmaxf(row_max, smem.max[w * kM + r]);
  float row_sum = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) o[j] = 0.f;
  if (row_max != kNegInf) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float factor = exp2f((smem.max[w * kM + r] - row_max) * scale_log2);
      row_sum += factor * smem.sum[w * kM + r];
#pragma unroll
      for (int j = 0; j < 4; ++j) o[j] += factor * smem.o[(w * kM + r) * kHeadDim + c + j];
    }
  }
  if (!(row_sum > 0.f)) return kNegInf;
  const float inv = 1.f / row_sum;
#pragma unroll
  for (int j = 0; j < 4; ++j) o[j] *= inv;
  return (row_max * scale_log2 + log2f(row_sum)) * kLn2;
}

}  // namespace splitkv::detail
