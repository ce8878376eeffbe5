// The meeting of a stream-K tail tile's two parts (PrefillParams::stream_steps): each consumer
// warpgroup of the two blocks that computed a part of the tile arrives on the slot's counter after
// its last P V. The first to arrive stores its 64 rows' normalized O and LSE in the slot and marks
// them ready; the second waits for that mark (the first is running, so the wait is short and cannot
// depend on a block that was never scheduled), loads them and merges both parts, in key order
// whichever arrived first, so the result has the same bits on every run. Its rows then leave through
// the usual epilogue.
//
// Both blocks hold the tile's rows in the same accumulator layout (same traits, same thread of the
// same consumer), so the slot keeps each thread's fragment as it is: no index math and coalesced
// 16-byte accesses.
//
// The merge of the two parts is its own two-term form of the combine kernel's LSE merge
// (CombineState, combine_state.cuh), not a call of it: CombineState folds four columns at a time and
// takes its weights' exponentials per fold, i.e. per float4 of the row (32 times per row at D=128
// here), where this merge needs two weights per row, normalized once. The result is the same merge
// up to rounding; the stream-K tests compare it with the fp64 reference and with its own reruns.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/prefill/prefill_params.hpp"

namespace splitkv::detail {

// The counter's values: +1 per arrival (two at most: bits 0-1), +kStreamPartReady once the first
// arrival's rows are in the slot (a bit the arrivals never carry into).
constexpr int32_t kStreamPartReady = 4;

__device__ __forceinline__ int32_t load_acquire(const int32_t* word) {
  int32_t v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(word) : "memory");
  return v;
}

// A named barrier of the warpgroup's 128 threads that the compiler moves no memory access across
// (CUTLASS's is an asm statement without a memory clobber).
__device__ __forceinline__ void warpgroup_barrier(uint32_t barrier_id) {
  asm volatile("" ::: "memory");
  cutlass::arch::NamedBarrier::sync(128, barrier_id);
  asm volatile("" ::: "memory");
}

// acc_rc: the warpgroup's O accumulator as (rows, cols); lse / inv: its rows' LSE and 1 / sum.
// holds_head: this part has the tile's first keys. arrival: a shared word of this warpgroup;
// barrier_id: a named barrier of its 128 threads. Returns false when this warpgroup stored its part
// (the other writes the rows); true when acc_rc, lse and inv now hold the merged rows (inv = 1).
template <class Traits, class AccRC, int kRows>
__device__ __forceinline__ bool merge_cut_tile(const PrefillParams& p, int slot, bool holds_head, int consumer, int tid,
                                               AccRC& acc_rc, float (&lse)[kRows], float (&inv)[kRows], int& arrival,
                                               uint32_t barrier_id) {
  using namespace cute;
  constexpr int kCols = decltype(size<1>(acc_rc))::value;
  static_assert(kCols % 4 == 0, "whole float4s of one row");
  static_assert(kRows == 2, "the workspace keeps two LSE words per thread (plan::stream_k_workspace)");
  constexpr int kChunks = kRows * kCols / 4;  // float4s per thread
  const int64_t unit = int64_t(slot) * Traits::kConsumerWarpgroups + consumer;
  int32_t* counter = p.stream_counters + unit;
  float4* slot_o = reinterpret_cast<float4*>(p.stream_o) + unit * kChunks * 128 + tid;
  float* slot_lse = p.stream_lse + unit * kRows * 128 + tid;

  volatile int& shared_arrival = arrival;
  if (tid == 0) shared_arrival = atomicAdd(counter, 1);
  warpgroup_barrier(barrier_id);
  const bool first = shared_arrival == 0;
  if (first) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < kCols; c += 4) {
        slot_o[(r * kCols + c) / 4 * 128] = make_float4(acc_rc(r, c) * inv[r], acc_rc(r, c + 1) * inv[r],
                                                        acc_rc(r, c + 2) * inv[r], acc_rc(r, c + 3) * inv[r]);
      }
      slot_lse[r * 128] = lse[r];
    }
    __threadfence();
    warpgroup_barrier(barrier_id);  // (also: every thread has read the arrival)
    if (tid == 0) atomicAdd(counter, kStreamPartReady);
    return false;
  }
  // Every thread waits for the mark itself (an acquire each): no lane spins while the others of its
  // warp stand at a barrier.
  while ((load_acquire(counter) & kStreamPartReady) == 0) {
  }
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const float other_lse = __ldcg(slot_lse + r * 128);
    const float lse_head = holds_head ? lse[r] : other_lse;
    const float lse_tail = holds_head ? other_lse : lse[r];
    const float top = fmaxf(lse_head, lse_tail);
    // Weights of the parts' normalized rows: exp(LSE_part - top) / the sum of both.
    float w_head = 0.f, w_tail = 0.f, merged_lse = kNegInf;
    if (top != kNegInf) {
      w_head = fast_exp2((lse_head - top) * kLog2e);
      w_tail = fast_exp2((lse_tail - top) * kLog2e);
      const float sum = w_head + w_tail;
      merged_lse = top + logf(sum);
      w_head /= sum;
      w_tail /= sum;
    }
    CUTE_UNROLL
    for (int c = 0; c < kCols; c += 4) {
      const float4 o = __ldcg(slot_o + (r * kCols + c) / 4 * 128);
      const float other[4] = {o.x, o.y, o.z, o.w};
      CUTE_UNROLL
      for (int j = 0; j < 4; ++j) {
        const float mine = acc_rc(r, c + j) * inv[r];  // the value the first arrival would have stored
        // One expression for both arrival orders (no contraction that depends on which is in registers).
        const float head = holds_head ? mine : other[j];
        const float tail = holds_head ? other[j] : mine;
        acc_rc(r, c + j) = fmaf(head, w_head, tail * w_tail);
      }
    }
    lse[r] = merged_lse;
    inv[r] = 1.f;
  }
  return true;
}

}  // namespace splitkv::detail
