// Page ids (and the slot within the page) of a warp's upcoming KV sub-tiles, prefetched 32 at a
// time (one per lane) and handed out by shuffle, so the block-table lookup and the division by the
// page size are off the critical path of issuing the next copy.
#pragma once

#include <cstdint>

#include "kernels/common/fast_divmod.hpp"

namespace splitkv::detail {

struct PageSlot {
  int page;  // block-table entry
  int slot;  // first token's position in the page
};

// Page and slot of key t of a sequence whose block-table row is table_row; (0, 0) at or past hi.
__device__ __forceinline__ PageSlot page_slot_of(const int32_t* table_row, const FastDivmod& page_size, int t, int hi) {
  if (t >= hi) return PageSlot{0, 0};
  const int entry = page_size.div(t);
  return PageSlot{table_row[entry], t - entry * page_size.divisor};
}

struct PageIdCache {
  int base = -32;  // sub-tile index held by lane 0
  PageSlot held{0, 0};

  // Page and slot of the warp's sub-tile `subtile` (warp-uniform); load(m) returns them for sub-tile
  // m (called by each lane for its own m).
  template <class LoadFn>
  __device__ __forceinline__ PageSlot get(int subtile, int lane, LoadFn&& load) {
    if (subtile - base >= 32) {  // warp-uniform
      base = subtile;
      held = load(subtile + lane);
    }
    return PageSlot{__shfl_sync(0xffffffffu, held.page, subtile - base),
                    __shfl_sync(0xffffffffu, held.slot, subtile - base)};
  }
};

}  // namespace splitkv::detail
