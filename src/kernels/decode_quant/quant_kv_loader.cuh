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
  // The swizzle (code_offset) repeats every kSwizzleKeys keys, so copies kPeriod apart land at the
  // same offset kPeriodBytes further on: only the first kPeriod offsets are kept in registers.
  static constexpr int kSwizzleKeys = CodeSwizzle<kRowBytes>::kPeriodKeys;
  static constexpr int kPeriodWanted = kSwizzleKeys <= kKeysPerCopy ? 1 : kSwizzleKeys / kKeysPerCopy;
  static constexpr int kPeriod = kPeriodWanted < kCopies ? kPeriodWanted : kCopies;
  static constexpr int kPeriodBytes = kPeriod * kKeysPerCopy * kRowBytes;
  static_assert(kPeriod == kCopies || (kCopies % kPeriod == 0 && (kPeriod * kKeysPerCopy) % kSwizzleKeys == 0));

  int key0;             // key of copy 0
  int64_t lane_src;     // its byte offset from the sub-tile's first row
  int64_t src_step;     // bytes between copy j and j + 1
  int dst[kPeriod];     // byte offsets in the sub-tile's shared memory of copies 0 .. kPeriod - 1

  __device__ __forceinline__ RowCopies(int lane, int64_t row_stride) {
    key0 = lane / kChunks;
    const int chunk = lane % kChunks;
    lane_src = key0 * row_stride + chunk * 16;
    src_step = kKeysPerCopy * row_stride;
    CUTE_UNROLL
    for (int j = 0; j < kPeriod; ++j) dst[j] = code_offset<kRowBytes>(key0 + j * kKeysPerCopy, chunk * 16);
  }

  // Copies of the sub-tile whose copy 0 of this lane is at `src` into `smem`; keys >= keys_valid
  // are zero-filled from `anywhere` (a valid address that is not read).
  __device__ __forceinline__ void issue(const char* src, char* smem, int keys_valid, const void* anywhere) const {
    CUTE_UNROLL
    for (int j = 0; j < kCopies; ++j) {
      const bool valid = key0 + j * kKeysPerCopy < keys_valid;
      const char* from = valid ? src + j * src_step : static_cast<const char*>(anywhere);
      char* to = smem + dst[j % kPeriod] + (j / kPeriod) * kPeriodBytes;
      cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>::copy(*reinterpret_cast<const cute::uint128_t*>(from),
                                                                   *reinterpret_cast<cute::uint128_t*>(to), valid);
    }
  }
};

// Issues a warp's sub-tiles in order (sub-tile n into ring stage n % kStages). The lane's source
// addresses are worked out once: a contiguous cache advances them by the warp's stride of
// kWarps * kN keys per sub-tile; a paged one adds each sub-tile's page and slot offsets to them.
// Keys per channel (Traits::kChannelKeys): the warp takes its sub-tiles in runs of one 64-key group
// (run r of warp w is group w + r * kWarps of the block's range), the first sub-tile of a run also
// brings the group's (scale[D], min[D]) into a group slot when the group is complete, and the K
// lanes copy no per-token pairs (the keys have none).
template <class Traits>
struct QuantKvLoader {
  static constexpr int kN = Traits::kWarpKeys;
  static constexpr int kStages = Traits::kStages;
  static constexpr int kWarpStride = Traits::kWarps * kN;  // keys between a warp's sub-tiles

  const DecodeParams& p;
  // This warp's kStages stages of Traits::kStageBytes, as a 32-bit shared-memory address: a
  // generic pointer kept across the key loop made ptxas rebuild the shared window's base (two
  // S2UR SR_CgaCtaId per sub-tile) after the loop's branches (docs/TUNING.md, "Kernels").
  uint32_t ring;
  int lo, hi, warp, lane;
  int next = 0;        // the next sub-tile to issue
  int next_stage = 0;  // its ring stage
  int read_stage = 0;  // the ring stage the key loop reads next
  // This lane's copy 0 of K, V and its (scale, min) pair (K: lanes 0-15, V: 16-31): of the next
  // sub-tile (contiguous) or at page 0, slot 0 (paged). Quantized strides count bytes; scales
  // are 16-bit elements.
  const char* k_src;
  const char* v_src;
  const uint16_t* scale_src;
  int64_t scale_page_stride, scale_token_stride;  // of this lane's side
  int scale_dst;                                  // this lane's pair in a stage
  const int32_t* table_row;                       // nullptr: contiguous KV
  RowCopies<kN, Traits::kKRowBytes> k_copies;
  RowCopies<kN, Traits::kVRowBytes> v_copies;
  PageIdCache page_ids;
  bool bad_input = false;
  // Keys per channel only: the group scales of the KV head (and, contiguous, of the sequence), and
  // the end of the sequence's complete groups.
  const uint16_t* group_src = nullptr;
  int groups_end = 0;

  __device__ __forceinline__ QuantKvLoader(const DecodeParams& params, char* warp_ring, int b, int kv_head, int lo_,
                                           int hi_, int warp_, int lane_, int groups_end_ = 0)
      : p(params), ring(static_cast<uint32_t>(__cvta_generic_to_shared(warp_ring))), lo(lo_), hi(hi_), warp(warp_),
        lane(lane_), k_copies(lane_, bytes(params.kv.k.token_stride)), v_copies(lane_, bytes(params.kv.v.token_stride)) {
    if constexpr (Traits::kChannelKeys) {
      group_src = static_cast<const uint16_t*>(p.kv.k_scales.data) + kv_head * p.kv.k_scales.head_stride;
      if (p.kv.block_table == nullptr) group_src += b * p.kv.k_scales.block_stride;
      groups_end = groups_end_;
    }
    const bool is_v = lane >= kN;
    scale_page_stride = is_v ? p.kv.v_scales.block_stride : p.kv.k_scales.block_stride;
    scale_token_stride = is_v ? p.kv.v_scales.token_stride : p.kv.k_scales.token_stride;
    scale_dst = (is_v ? Traits::kVScaleOffset : Traits::kKScaleOffset) + (lane % kN) * 4;
    table_row = p.kv.block_table != nullptr ? p.kv.block_table + b * p.kv.block_table_stride : nullptr;
    k_src = static_cast<const char*>(p.kv.k.data) + kv_head * bytes(p.kv.k.head_stride) + k_copies.lane_src;
    v_src = static_cast<const char*>(p.kv.v.data) + kv_head * bytes(p.kv.v.head_stride) + v_copies.lane_src;
    scale_src = static_cast<const uint16_t*>(is_v ? p.kv.v_scales.data : p.kv.k_scales.data) +
                kv_head * (is_v ? p.kv.v_scales.head_stride : p.kv.k_scales.head_stride) + (lane % kN) * scale_token_stride;
    if (table_row == nullptr) {  // the sequence's rows from this warp's first sub-tile on
      const int t0 = subtile_start(0);
      k_src += b * bytes(p.kv.k.block_stride) + t0 * bytes(p.kv.k.token_stride);
      v_src += b * bytes(p.kv.v.block_stride) + t0 * bytes(p.kv.v.token_stride);
      scale_src += b * scale_page_stride + t0 * scale_token_stride;
    }
  }

  // A K/V stride of DecodeParams in bytes (Traits::kStrideBytes).
  __device__ __forceinline__ static int64_t bytes(int64_t stride) { return stride * Traits::kStrideBytes; }
  __device__ __forceinline__ int subtile_start(int n) const {
    if constexpr (Traits::kRunSubtiles == 1) {
      return lo + (warp + n * Traits::kWarps) * kN;
    } else {
      const int run = n / Traits::kRunSubtiles;
      return lo + ((warp + run * Traits::kWarps) * Traits::kRunSubtiles + n % Traits::kRunSubtiles) * kN;
    }
  }
  // Keys per channel: the (scale[D], min[D]) fp16 of sub-tile n's group, valid from the key loop's
  // step n on where n starts a run of a complete group.
  // This warp's group slots, after every warp's ring (a shared address; worked out where used, as a
  // register kept across the key loop made the INT4 kernel spill).
  __device__ __forceinline__ uint32_t group_slots() const {
    return ring + Traits::kGroupOffset + warp * (Traits::kGroupSlots * Traits::kGroupBytes - kStages * Traits::kStageBytes);
  }
  __device__ __forceinline__ const uint16_t* group_scales(int n) const {
    const int slot = (n / Traits::kRunSubtiles) % Traits::kGroupSlots;
    return static_cast<const uint16_t*>(__cvta_shared_to_generic(group_slots() + slot * Traits::kGroupBytes));
  }
  __device__ __forceinline__ char* stage(int s) const {
    return static_cast<char*>(__cvta_shared_to_generic(ring + s * Traits::kStageBytes));
  }

  // The key loop's step n of my_subtiles: waits for sub-tile n (every lane's copies), keeps
  // kStages - 1 sub-tiles in flight, and returns sub-tile n's stage.
  __device__ __forceinline__ const char* next_to_read(int n, int my_subtiles) {
    cute::cp_async_wait<kStages - 2>();
    __syncwarp();  // sub-tile n visible to all lanes; all lanes are done with sub-tile n - 1
    if (n + kStages - 1 < my_subtiles) issue_next();
    cute::cp_async_fence();
    const char* s = stage(read_stage);
    read_stage = read_stage == kStages - 1 ? 0 : read_stage + 1;
    return s;
  }

  // Issues the copies of the next sub-tile (the caller fences the group).
  __device__ __forceinline__ void issue_next() {
    const int t0 = subtile_start(next);
    const char* k = k_src;
    const char* v = v_src;
    const uint16_t* scales = scale_src;
    bool page_ok = true;
    const uint16_t* group = group_src;  // keys per channel: the group's (scale, min) row
    if (table_row != nullptr) {  // a 16-key sub-tile never straddles pages
      const PageSlot at =
          page_ids.get(next, lane, [&](int m) { return page_slot_of(table_row, p.kv.page_size, subtile_start(m), hi); });
      page_ok = at.page >= 0 && at.page < p.kv.num_pages;
      bad_input |= !page_ok;
      const int64_t page = page_ok ? at.page : 0;
      k += page * bytes(p.kv.k.block_stride) + at.slot * bytes(p.kv.k.token_stride);
      v += page * bytes(p.kv.v.block_stride) + at.slot * bytes(p.kv.v.token_stride);
      scales += page * scale_page_stride + at.slot * scale_token_stride;
      if constexpr (Traits::kChannelKeys) {
        group += page * p.kv.k_scales.block_stride + (at.slot / Traits::kKeyGroup) * p.kv.k_scales.token_stride;
      }
    } else if constexpr (Traits::kRunSubtiles == 1) {
      k_src += kWarpStride * bytes(p.kv.k.token_stride);
      v_src += kWarpStride * bytes(p.kv.v.token_stride);
      scale_src += kWarpStride * scale_token_stride;
    } else {
      const int step = subtile_start(next + 1) - t0;  // kN within a run, to the next run after it
      k_src += step * bytes(p.kv.k.token_stride);
      v_src += step * bytes(p.kv.v.token_stride);
      scale_src += step * scale_token_stride;
      group += (t0 / Traits::kKeyGroup) * p.kv.k_scales.token_stride;
    }
    const int keys_valid = page_ok ? hi - t0 : 0;
    char* dst = stage(next_stage);
    k_copies.issue(k, dst, keys_valid, p.kv.k.data);
    v_copies.issue(v, dst + Traits::kVOffset, keys_valid, p.kv.v.data);
    if constexpr (Traits::kChannelKeys) {
      if (next % Traits::kRunSubtiles == 0 && page_ok && t0 + Traits::kKeyGroup <= groups_end) {
        issue_group_scales(group, next);
      }
    }
    if constexpr (Traits::kTokenScales) {
      const bool valid = lane % kN < keys_valid && !(Traits::kChannelKeys && lane < kN);
      const void* anywhere = lane >= kN ? p.kv.v_scales.data : p.kv.k_scales.data;
      cute::SM80_CP_ASYNC_CACHEALWAYS_ZFILL<uint32_t>::copy(
          *reinterpret_cast<const uint32_t*>(valid ? static_cast<const void*>(scales) : anywhere),
          *reinterpret_cast<uint32_t*>(dst + scale_dst), valid);
    }
    ++next;
    next_stage = next_stage == kStages - 1 ? 0 : next_stage + 1;
  }

  // Keys per channel: the group's 4 D bytes of (scale, min), D / 8 bytes per lane, into run n's slot.
  __device__ __forceinline__ void issue_group_scales(const uint16_t* group, int n) {
    constexpr int kLaneBytes = Traits::kGroupBytes / 32;
    static_assert(kLaneBytes == 8 || kLaneBytes % 16 == 0);
    const char* from = reinterpret_cast<const char*>(group) + lane * kLaneBytes;
    const uint32_t to = group_slots() + ((n / Traits::kRunSubtiles) % Traits::kGroupSlots) * Traits::kGroupBytes +
                        lane * kLaneBytes;
    char* to_ptr = static_cast<char*>(__cvta_shared_to_generic(to));
    if constexpr (kLaneBytes == 8) {
      cute::SM80_CP_ASYNC_CACHEALWAYS<uint64_t>::copy(*reinterpret_cast<const uint64_t*>(from),
                                                      *reinterpret_cast<uint64_t*>(to_ptr));
    } else {
      CUTE_UNROLL
      for (int i = 0; i < kLaneBytes / 16; ++i) {
        cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>::copy(
            *reinterpret_cast<const cute::uint128_t*>(from + 16 * i), *reinterpret_cast<cute::uint128_t*>(to_ptr + 16 * i));
      }
    }
  }
};

}  // namespace splitkv::detail
