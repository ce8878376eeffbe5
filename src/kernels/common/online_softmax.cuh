// Online softmax over one thread's rows of a score fragment (FlashAttention's recurrence), with
// fp32 statistics. Scores stay in raw units; the softmax scale (times log2 e) is fused into the
// exponent, so it must be positive (the API enforces it).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/quad_reduce.cuh"

namespace splitkv::detail {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLn2 = 0.69314718055994530942f;
constexpr float kLog2e = 1.44269504088896340736f;

// 2^x with the SFU's approximate exponent (flushes denormal results to 0, which a softmax never
// needs); plain exp2f adds denormal handling around the same instruction.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows];  // raw-score max seen so far (-inf: nothing visible yet)
  float row_sum[kRows];  // this thread's part of sum(exp2(s * scale_log2 - row_max * scale_log2))

  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = kNegInf;
      row_sum[r] = 0.f;
    }
  }

  // Folds a new block of scores into the state: scores (rows, cols) become probabilities
  // (unnormalized, relative to the new row max) and acc_o (rows, D) is rescaled to match.
  template <class ScoreTensor, class OutTensor>
  __device__ __forceinline__ void update(ScoreTensor& scores, OutTensor& acc_o, float scale_log2) {
    float rescale[kRows];
    fold(scores, scale_log2, rescale);
    rescale_rows(acc_o, rescale);
  }

  // The two halves of update(), for kernels whose P*V product is still in flight when the next
  // scores arrive: fold() turns scores into probabilities and returns by how much the output
  // accumulated so far must be scaled; rescale_rows() applies that once the accumulator is free.
  template <class ScoreTensor>
  __device__ __forceinline__ void fold(ScoreTensor& scores, float scale_log2, float (&rescale)[kRows]) {
    static_assert(decltype(cute::size<0>(scores))::value == kRows);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float block_max = row_max[r];
#pragma unroll
      for (int c = 0; c < cute::size<1>(scores); ++c) block_max = fmaxf(block_max, scores(r, c));
      block_max = quad_max(block_max);
      // A row with nothing visible yet keeps -inf; use 0 as its base so no inf - inf appears.
      const float base = block_max == kNegInf ? 0.f : block_max * scale_log2;
      rescale[r] = fast_exp2(row_max[r] * scale_log2 - base);
      row_max[r] = block_max;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < cute::size<1>(scores); ++c) {
        scores(r, c) = fast_exp2(scores(r, c) * scale_log2 - base);
        sum += scores(r, c);
      }
      row_sum[r] = row_sum[r] * rescale[r] + sum;
    }
  }

  template <class OutTensor>
  __device__ __forceinline__ static void rescale_rows(OutTensor& acc_o, const float (&rescale)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int c = 0; c < cute::size<1>(acc_o); ++c) acc_o(r, c) *= rescale[r];
    }
  }

  // Completes the row sums across the quad (call once, after the last update).
  __device__ __forceinline__ void reduce_sums() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) row_sum[r] = quad_sum(row_sum[r]);
  }

  // Natural-log LSE of row r (after reduce_sums); -inf when the row saw no key.
  __device__ __forceinline__ float lse(int r, float scale_log2) const {
    return row_sum[r] == 0.f ? kNegInf : (row_max[r] * scale_log2 + log2f(row_sum[r])) * kLn2;
  }
};

}  // namespace splitkv::detail
