// KV loading of the decode kernel: one warp's 16-key sub-tiles of K and V, contiguous or paged,
// copied into the warp's shared-memory ring with cp.async. Keys at or past the block's end are
// zero-filled, never read; a page id outside the pool is never dereferenced and marks the block's
// input as bad. This is the piece a quantized KV cache replaces (raw codes in, dequantized after
// the load).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/page_id_cache.cuh"

namespace splitkv::detail {

template <class Traits, class SmemK, class SmemV>
struct DecodeKvLoader {
  using Element = typename Traits::Element;
  static constexpr int kN = Traits::kWarpKeys;
  static constexpr int D = Traits::kHeadDim;

  const DecodeParams& p;
  SmemK sK;  // (N, D, S) this warp's K ring
  SmemV sV;  // (N, D, S)
  int b, lo, hi, warp, lane;
  const Element* k_head;
  const Element* v_head;
  const int32_t* table_row;  // nullptr: contiguous KV
  PageIdCache page_ids;
  bool bad_input = false;    // a page id outside the pool was seen

  __device__ __forceinline__ DecodeKvLoader(const DecodeParams& params, SmemK k_ring, SmemV v_ring, int b_, int kv_head,
                                            int lo_, int hi_, int warp_, int lane_)
      : p(params), sK(k_ring), sV(v_ring), b(b_), lo(lo_), hi(hi_), warp(warp_), lane(lane_) {
    k_head = static_cast<const Element*>(p.kv.k.data) + kv_head * p.kv.k.head_stride;
    v_head = static_cast<const Element*>(p.kv.v.data) + kv_head * p.kv.v.head_stride;
    table_row = p.kv.block_table != nullptr ? p.kv.block_table + b * p.kv.block_table_stride : nullptr;
  }

  // First key of the warp's n-th sub-tile: warps take sub-tiles round-robin.
  __device__ __forceinline__ int subtile_start(int n) const { return lo + (warp + n * Traits::kWarps) * kN; }

  // Issues the copies of sub-tile n into ring stage `stage` (the caller fences the group).
  __device__ __forceinline__ void issue(int n, int stage) {
    using namespace cute;
    const int t0 = subtile_start(n);
    int64_t page = b, slot = t0;
    bool page_ok = true;
    if (table_row != nullptr) {  // a 16-key sub-tile never straddles pages: page_size % 16 == 0, t0 % 16 == 0
      const PageSlot at =
          page_ids.get(n, lane, [&](int m) { return page_slot_of(table_row, p.kv.page_size, subtile_start(m), hi); });
      page = at.page;
      slot = at.slot;
      page_ok = page >= 0 && page < p.kv.num_pages;
      bad_input |= !page_ok;
      if (!page_ok) page = 0;
    }
    typename Traits::GmemWarpCopy gmem_copy;
    auto thr_copy = gmem_copy.get_thread_slice(lane);
    Tensor gK = make_tensor(make_gmem_ptr(k_head + page * p.kv.k.block_stride + slot * p.kv.k.token_stride),
                            Shape<Int<kN>, Int<D>>{}, make_stride(p.kv.k.token_stride, _1{}));  // (N, D)
    Tensor gV = make_tensor(make_gmem_ptr(v_head + page * p.kv.v.block_stride + slot * p.kv.v.token_stride),
                            Shape<Int<kN>, Int<D>>{}, make_stride(p.kv.v.token_stride, _1{}));  // (N, D)
    Tensor tKgK = thr_copy.partition_S(gK);  // (CPY, CPY_N, CPY_D)
    Tensor tVgV = thr_copy.partition_S(gV);
    Tensor tKsK = thr_copy.partition_D(sK);  // (CPY, CPY_N, CPY_D, S)
    Tensor tVsV = thr_copy.partition_D(sV);
    Tensor tKVcKV = thr_copy.partition_S(make_identity_tensor(Shape<Int<kN>, Int<D>>{}));  // -> (key, col)
    CUTE_UNROLL
    for (int m = 0; m < size<1>(tKgK); ++m) {
      const bool in_range = page_ok && t0 + get<0>(tKVcKV(0, m, 0)) < hi;  // else zero-fill
      copy(gmem_copy.with(in_range), tKgK(_, m, _), tKsK(_, m, _, stage));
      copy(gmem_copy.with(in_range), tVgV(_, m, _), tVsV(_, m, _, stage));
    }
  }
};

}  // namespace splitkv::detail
