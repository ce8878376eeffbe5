// The prefetch instruction both L2 prefetches before the PDL wait use (decode/l2_prefetch.cuh,
// prefill_sm90/l2_prefetch_tile.cuh): it asks L2 for a line and returns nothing, so no thread
// waits on it and nothing read early can be used stale.
#pragma once

#include <cstdint>

namespace splitkv::detail {

// Every 128-byte line of [row, row + bytes).
__device__ __forceinline__ void prefetch_lines_to_l2(const void* row, int bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t(127);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(row) + bytes - 1) & ~uintptr_t(127);
  for (uintptr_t line = first; line <= last; line += 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
  }
}

}  // namespace splitkv::detail
