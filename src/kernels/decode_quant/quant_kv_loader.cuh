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

template <class Traits>
struct QuantKvLoader {
  static constexpr int kN = Traits::kWarpKeys;

  const DecodeParams& p;
  char* ring;  // this warp's kStages stages of Traits::kStageBytes
  int b, kv_head, lo, hi, warp, lane;
  const char* k_head;  // codes of this KV head (byte addresses: quantized strides count bytes)
  const char* v_head;
  const int32_t* table_row;  // nullptr: contiguous KV
  PageIdCache page_ids;
  bool bad_input = false;

  __device__ __forceinline__ QuantKvLoader(const DecodeParams& params, char* warp_ring, int b_, int kv_head_, int lo_,
                                           int hi_, int warp_, int lane_)
      : p(params), ring(warp_ring), b(b_), kv_head(kv_head_), lo(lo_), hi(hi_), warp(warp_), lane(lane_) {
    k_head = static_cast<const char*>(p.k) + kv_head * p.k_head_stride;
    v_head = static_cast<const char*>(p.v) + kv_head * p.v_head_stride;
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
    char* dst = stage(s);
    copy_rows<Traits::kKRowBytes>(k_head + page * p.k_page_stride + slot * p.k_token_stride, p.k_token_stride,
                                  dst, t0, page_ok);
    copy_rows<Traits::kVRowBytes>(v_head + page * p.v_page_stride + slot * p.v_token_stride, p.v_token_stride,
                                  dst + Traits::kVOffset, t0, page_ok);
    if constexpr (Traits::kTokenScales) {
      // Lanes 0-15: the K pair of key `lane`; lanes 16-31: the V pair of key `lane - 16`.
      const bool is_v = lane >= kN;
      const int key = lane % kN;
      const int64_t offset = is_v ? page * p.v_scale_page_stride + kv_head * p.v_scale_head_stride +
                                        (slot + key) * p.v_scale_token_stride
                                  : page * p.k_scale_page_stride + kv_head * p.k_scale_head_stride +
                                        (slot + key) * p.k_scale_token_stride;
      const uint16_t* base = static_cast<const uint16_t*>(is_v ? p.v_scales : p.k_scales);
      const bool valid = page_ok && t0 + key < hi;
      cute::SM80_CP_ASYNC_CACHEALWAYS_ZFILL<uint32_t>::copy(
          *reinterpret_cast<const uint32_t*>(valid ? base + offset : base),
          *reinterpret_cast<uint32_t*>(dst + (is_v ? Traits::kVScaleOffset : Traits::kKScaleOffset) + key * 4), valid);
    }
  }

 private:
  // The kN rows of kRowBytes codes starting at `rows` (key t0), 16 bytes per copy.
  template <int kRowBytes>
  __device__ __forceinline__ void copy_rows(const char* rows, int64_t row_stride, char* dst, int t0, bool page_ok) {
    constexpr int kChunks = kRowBytes / 16;
    static_assert(kN * kChunks % 32 == 0);
    CUTE_UNROLL
    for (int j = 0; j < kN * kChunks / 32; ++j) {
      const int i = lane + 32 * j;  // consecutive lanes, consecutive chunks of a row: coalesced
      const int key = i / kChunks, chunk = i % kChunks;
      const bool valid = page_ok && t0 + key < hi;
      const char* src = valid ? rows + key * row_stride + chunk * 16 : rows;
      cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>::copy(
          *reinterpret_cast<const cute::uint128_t*>(src),
          *reinterpret_cast<cute::uint128_t*>(dst + code_offset<kRowBytes>(key, chunk * 16)), valid);
    }
  }
};

}  // namespace splitkv::detail
