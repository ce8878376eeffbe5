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

  // fold() with a lazy maximum: a row keeps its reference maximum until a block's maximum exceeds
  // it by more than kLazyLog2 (log2 units), so probabilities reach at most 2^kLazyLog2 (fp16 holds
  // them; the row sum and the LSE stay exact, as they are relative to the reference). The O
  // rescale then happens a few times per row instead of whenever the maximum creeps up.
  // Returns whether this thread's accumulated O must be multiplied by `rescale` (a row whose
  // reference moved after it had seen a key; before that its O is still zero).
  static constexpr float kLazyLog2 = 8.f;
  template <class ScoreTensor>
  __device__ __forceinline__ bool fold_lazy(ScoreTensor& scores, float scale_log2, float (&rescale)[kRows]) {
    static_assert(decltype(cute::size<0>(scores))::value == kRows);
    bool must_rescale = false;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float block_max = kNegInf;
#pragma unroll
      for (int c = 0; c < cute::size<1>(scores); ++c) block_max = fmaxf(block_max, scores(r, c));
      block_max = quad_max(block_max);
      rescale[r] = 1.f;
      if (row_max[r] == kNegInf) {
        row_max[r] = block_max;  // first visible keys: nothing to rescale yet
      } else if (block_max * scale_log2 > row_max[r] * scale_log2 + kLazyLog2) {
        rescale[r] = fast_exp2((row_max[r] - block_max) * scale_log2);
        row_max[r] = block_max;
        must_rescale = true;
      }
      // A row with nothing visible yet keeps -inf; use 0 as its base so no inf - inf appears.
      const float base = row_max[r] == kNegInf ? 0.f : row_max[r] * scale_log2;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < cute::size<1>(scores); ++c) {
        scores(r, c) = fast_exp2(scores(r, c) * scale_log2 - base);
        sum += scores(r, c);
      }
      row_sum[r] = row_sum[r] * rescale[r] + sum;
    }
    return must_rescale;
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

// The key loop of a kernel whose O rescale is rare (fold_lazy): for n in [0, steps), scores(n)
// computes step n's probabilities and returns whether O must be rescaled first (warp-uniform);
// rescale() then multiplies O, and accumulate(n) adds P * V. The rescale sits on a path that leaves
// the inner loop: written as an `if` inside the loop, the compiler predicates it, and a
// predicated-off instruction still takes an issue slot, one per accumulator element on every step.
template <class Scores, class Rescale, class Accumulate>
__device__ __forceinline__ void key_loop_rescaling_rarely(int steps, Scores&& scores, Rescale&& rescale,
                                                          Accumulate&& accumulate) {
  int n = 0;
  while (n < steps) {
    bool moved = false;
    for (; n < steps; ++n) {
      moved = scores(n);
      if (moved) break;
      accumulate(n);
    }
    if (!moved) break;
    rescale();
    accumulate(n);
    ++n;
  }
}

}  // namespace splitkv::detail
