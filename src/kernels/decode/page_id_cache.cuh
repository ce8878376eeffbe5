// Page ids of a warp's upcoming KV sub-tiles, prefetched 32 at a time (one per lane) and handed
// out by shuffle, so the block-table lookup is off the critical path of issuing the next copy.
#pragma once

namespace splitkv::detail {

struct PageIdCache {
  int base = -32;  // sub-tile index held by lane 0
  int ids = 0;

  // Page id of the warp's sub-tile `subtile` (warp-uniform); load_page_id(m) reads the table entry
  // of sub-tile m (called by each lane for its own m).
  template <class LoadFn>
  __device__ __forceinline__ int get(int subtile, int lane, LoadFn&& load_page_id) {
    if (subtile - base >= 32) {  // warp-uniform
      base = subtile;
      ids = load_page_id(subtile + lane);
    }
    return __shfl_sync(0xffffffffu, ids, subtile - base);
  }
};

}  // namespace splitkv::detail
