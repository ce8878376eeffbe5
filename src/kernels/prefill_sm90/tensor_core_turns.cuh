// Ping-pong of the two consumer warpgroups on the tensor cores (FlashAttention-3's scheme): a
// warpgroup issues its products only in its turn and passes the turn on right after issuing, so
// the products of one warpgroup run while the other computes its softmax, and the two cannot fall
// into step (both in softmax at once, the tensor cores idle).
//
// Each consumer warpgroup issues the same number of product groups ("sections") per block. Turn k
// of consumer 0 follows section k - 1 of consumer 1, and section k of consumer 1 follows section k
// of consumer 0. Consumer 0 does not wait for its first turn; consumer 1 does not pass its last,
// so no barrier is left half-arrived when the block ends.
#pragma once

#include <cutlass/arch/barrier.h>

namespace splitkv::detail {

struct TensorCoreTurns {
  // Named barriers 1 and 2 (0 is the consumers' barrier), counted from the first id CUTLASS leaves free.
  static constexpr uint32_t kFirstBarrier = 1;
  static constexpr uint32_t kThreads = 256;  // both consumer warpgroups
  int consumer;                              // 0 or 1

  __device__ __forceinline__ void wait_for_turn() const {
    cutlass::arch::NamedBarrier::sync(kThreads, kFirstBarrier + consumer);
  }
  __device__ __forceinline__ void pass_turn() const {
    cutlass::arch::NamedBarrier::arrive(kThreads, kFirstBarrier + 1 - consumer);
  }
  __device__ __forceinline__ void wait_for_first_turn() const {
    if (consumer == 1) wait_for_turn();
  }
  __device__ __forceinline__ void pass_last_turn() const {
    if (consumer == 0) pass_turn();
  }
};

}  // namespace splitkv::detail
