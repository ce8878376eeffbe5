// A block-wide exclusive prefix sum: each thread's value and the block's total, by warp shuffles
// and one value per warp in shared memory. Used where a block numbers items in thread order (the
// dequant copy's tokens, the mixed step's work units).
#pragma once

#include <cstdint>

namespace splitkv::detail {

// Exclusive prefix sum of v over a block of kThreads threads (a multiple of 32); *total gets the
// block's sum. warp_sums: kThreads / 32 values of shared memory, free again on return. Every thread
// of the block calls it.
template <int kThreads>
__device__ __forceinline__ int64_t block_exclusive_sum(int64_t v, int64_t* warp_sums, int64_t* total) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps of one block");
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t x = v;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int64_t y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  int64_t before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    before += w < warp ? warp_sums[w] : 0;
    all += warp_sums[w];
  }
  __syncthreads();  // warp_sums free for the next call
  *total = all;
  return before + x - v;
}

}  // namespace splitkv::detail
