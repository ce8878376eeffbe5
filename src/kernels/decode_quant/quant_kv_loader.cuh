// KV loading of the quantized-cache decode kernel: one warp's 16-key sub-tiles of K and V codes,
// with their (scale, min) pairs for INT8/INT4, copied as stored into the warp's shared-memory ring
// with cp.async (dequantization happens later, in registers). Same contract as the 16-bit loader
// (decode/kv_loader.cuh): keys at or past the block's end are zero-filled, never read (their codes
// and scales read back as 0); a page id outside the pool is never dereferenced and marks the
// block's input as bad.
#pragma once

#include <cute/arch/copy_sm80.hpp>

#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/page_id_cache.cuh"
#include "kernels/decode_quant/quant_decode_traits.cuh"

namespace splitkv::detail {

// One lane's share of copying a sub-tile of kN rows of kRowBytes codes, 16 bytes per copy, worked
// out once per block: consecutive lanes take consecutive chunks of a row (coalesced), copy j of a
// lane is kKeysPerCopy keys after its copy 0, and its shared-memory offset is fixed (the ring
// stage's base is added per sub-tile).
template <int kN, int kRowBytes>
struct RowCopies {
  static constexpr int kChunks = kRowBytes / 16;
  static constexpr int kCopies = kN * kChunks / 32;
  static constexpr int kKeysPerCopy = 32 / kChunks;
  static_assert(kN * kChunks % 32 == 0 && 32 % kChunks == 0);

  int key0;          // key of copy 0
  int64_t src0;      // its byte offset from the sub-tile's first row
  int64_t src_step;  // bytes between copy j and j + 1
  int dst[kCopies];  // byte offsets in the sub-tile's shared memory

  __device__ __forceinline__ RowCopies(int lane, int64_t row_stride) {
    key0 = lane / kChunks;
    const int chunk = lane % kChunks;
    src0 = key0 * row_stride + chunk * 16;
    src_step = kKeysPerCopy * row_stride;
    CUTE_UNROLL
    for (int j = 0; j < kCopies; ++j) dst[j] = code_offset<kRowBytes>(key0 + j * kKeysPerCopy, chunk * 16);
  }

  // Copies of the sub-tile whose first row is at `rows` into `smem`; keys >= keys_valid zero-filled.
  __device__ __forceinline__ void issue(const char* rows, char* smem, int keys_valid) const {
    CUTE_UNROLL
    for (int j = 0; j < kCopies; ++j) {
      const bool valid = key0 + j * kKeysPerCopy < keys_valid;
      const char* src = valid ? rows + src0 + j * src_step : rows;
      cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>::copy(*reinterpret_cast<const cute::uint128_t*>(src),
                                                                   *reinterpret_cast<cute::uint128_t*>(smem + dst[j]),
                                                                   valid);
    }
  }
};

template <class Traits>
struct QuantKvLoader {
  static constexpr int kN = Traits::kWarpKeys;

  const DecodeParams& p;
  char* ring;  // this warp's kStages stages of Traits::kStageBytes
  int b, lo, hi, warp, lane;
  const char* k_head;  // codes of this KV head (byte addresses: quantized strides count bytes)
  const char* v_head;
  const uint16_t* scale_head;  // (scale, min) pairs of this lane's side (K: lanes 0-15, V: 16-31)
  int64_t scale_page_stride, scale_token_stride;
  int scale_dst;               // this lane's pair in a stage
  const int32_t* table_row;    // nullptr: contiguous KV
  RowCopies<kN, Traits::kKRowBytes> k_copies;
  RowCopies<kN, Traits::kVRowBytes> v_copies;
  PageIdCache page_ids;
  bool bad_input = false;

  __device__ __forceinline__ QuantKvLoader(const DecodeParams& params, char* warp_ring, int b_, int kv_head, int lo_,
                                           int hi_, int warp_, int lane_)
      : p(params), ring(warp_ring), b(b_), lo(lo_), hi(hi_), warp(warp_), lane(lane_),
        k_copies(lane_, params.k_token_stride), v_copies(lane_, params.v_token_stride) {
    k_head = static_cast<const char*>(p.k) + kv_head * p.k_head_stride;
    v_head = static_cast<const char*>(p.v) + kv_head * p.v_head_stride;
    const bool is_v = lane >= kN;  // lanes 0-15: the K pair of key `lane`; 16-31: the V pair of key `lane - 16`
    scale_head = static_cast<const uint16_t*>(is_v ? p.v_scales : p.k_scales) +
                 kv_head * (is_v ? p.v_scale_head_stride : p.k_scale_head_stride);
    scale_page_stride = is_v ? p.v_scale_page_stride : p.k_scale_page_stride;
    scale_token_stride = is_v ? p.v_scale_token_stride : p.k_scale_token_stride;
    scale_dst = (is_v ? Traits::kVScaleOffset : Traits::kKScaleOffset) + (lane % kN) * 4;
    table_row = p.block_table != nullptr ? p.block_table + b * p.block_table_batch_stride : nullptr;
  }

  __device__ __forceinline__ int subtile_start(int n) const { return lo + (warp + n * Traits::kWarps) * kN; }
  __device__ __forceinline__ char* stage(int s) const { return ring + s * Traits::kStageBytes; }

  // Issues the copies of sub-tile n into ring stage `s` (the caller fences the group).
  __device__ __forceinline__ void issue(int n, int s) {
    const int t0 = subtile_start(n);
    int64_t page = b, slot = t0;
    bool page_ok = true;
    if (table_row != nullptr) {  // a 16-key sub-tile never straddles pages
      page = page_ids.get(n, lane, [&](int m) {
        const int t = subtile_start(m);
        return t < hi ? table_row[t / p.page_size] : 0;
      });
      slot = t0 % p.page_size;
      page_ok = page >= 0 && page < p.num_pages;
      bad_input |= !page_ok;
      if (!page_ok) page = 0;
    }
    const int keys_valid = page_ok ? hi - t0 : 0;
    char* dst = stage(s);
    k_copies.issue(k_head + page * p.k_page_stride + slot * p.k_token_stride, dst, keys_valid);
    v_copies.issue(v_head + page * p.v_page_stride + slot * p.v_token_stride, dst + Traits::kVOffset, keys_valid);
    if constexpr (Traits::kTokenScales) {
      const bool valid = lane % kN < keys_valid;
      const uint16_t* src = scale_head + page * scale_page_stride + (slot + lane % kN) * scale_token_stride;
      cute::SM80_CP_ASYNC_CACHEALWAYS_ZFILL<uint32_t>::copy(*reinterpret_cast<const uint32_t*>(valid ? src : scale_head),
                                                            *reinterpret_cast<uint32_t*>(dst + scale_dst), valid);
    }
  }
};

}  // namespace splitkv::detail
