// What a decode block does before it waits for the kernel ahead of it in the stream. Under
// programmatic dependent launch a block is resident while that kernel still runs, and until
// griddepcontrol.wait returns it may not read anything that kernel could write. It may still ask
// L2 for lines: L2 is the GPU's point of coherence, so a line fetched early and written afterwards
// by the kernel ahead is simply updated there, and a prefetch returns nothing a thread could use
// stale. Two parts (DecodeParams):
//  * l2_prefetch: the block's Q rows and its sequence length's line (prefetch instructions only, no
//    load, so nothing waits on them): after the wait the length and Q, the first two reads on the
//    block's critical path, come from L2.
//  * l2_prefetch_keys > 0: the block also reads its length early (bypassing L1: the same word is
//    read again after the wait, and an L1 copy taken now could be stale then), works out its
//    split's keys as decode_key_range will (split_span), and prefetches the first
//    l2_prefetch_keys of its K and V rows (and a quantized cache's per-token scales). The planner
//    asks for few keys or small whole splits only: larger prefetches measured slower
//    (docs/TUNING.md, "L2 prefetch").
// A length or page id read early may be one the kernel ahead is about to change: that only aims
// the prefetch at other lines, never at memory outside the cache (page ids outside the pool and
// lengths outside [1, max_kv_len] prefetch nothing).
#pragma once

#include <cstdint>

#include "kernels/common/attention_variants.hpp"
#include "kernels/common/split_rule.hpp"
#include "kernels/decode/decode_params.hpp"

namespace splitkv::detail {

// Every 128-byte line of [row, row + bytes).
__device__ __forceinline__ void prefetch_lines_to_l2(const void* row, int bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t(127);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(row) + bytes - 1) & ~uintptr_t(127);
  for (uintptr_t line = first; line <= last; line += 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
  }
}

// What the prefetch needs to know of a kernel's cache (the quantized-cache traits have these names;
// NativeCacheRows gives them for decode_mma's): kHeadDim, kBlockKeys, kThreads; a key's K and V
// rows (kKRowBytes, kVRowBytes); bytes per unit of DecodeParams' K/V strides (kStrideBytes); and
// whether (scale, min) pairs come with each key (kTokenScales; of V only with kChannelKeys, whose
// keys have a (scale[D], min[D]) row per 64-key group).
template <class Traits>
struct NativeCacheRows {
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kBlockKeys = Traits::kBlockKeys;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kKRowBytes = 2 * kHeadDim;
  static constexpr int kVRowBytes = 2 * kHeadDim;
  static constexpr int kStrideBytes = 2;
  static constexpr bool kTokenScales = false;
  static constexpr bool kChannelKeys = false;
};

// Called by every thread of the block before wait_for_prior_grids. With DecodeParams::l2_prefetch:
// the Q rows [row0, row0 + rows_here) of the tile and the lines of the sequence's length (and
// keys_after), no load needed; with l2_prefetch_keys > 0 also the length itself (read early) and
// the split's first l2_prefetch_keys keys. A no-op before sm_90 (decode kernels launch without
// programmatic dependent launch there).
template <class Rows, bool kVariants = false>
__device__ __forceinline__ void prefetch_block_start_to_l2(const DecodeParams& p, int b, int kv_head, int split,
                                                           int row0, int rows_here, int tid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (!p.l2_prefetch) return;
  constexpr int kQElementBytes = 2;  // Q is fp16 or bf16
  for (int r = tid; r < rows_here; r += Rows::kThreads) {
    const PackedRow at = packed_row(p, kv_head, row0 + r);
    prefetch_lines_to_l2(static_cast<const char*>(p.q) + kQElementBytes * (b * p.q_batch_stride +
                                                                            at.query * p.q_token_stride +
                                                                            at.head * p.q_head_stride),
                         kQElementBytes * Rows::kHeadDim);
  }
  if (tid == 0) {
    prefetch_lines_to_l2(p.kv.seq_lens + b, sizeof(int32_t));
    if (p.keys_after != nullptr) prefetch_lines_to_l2(p.keys_after + b, sizeof(int32_t));
  }
  if (p.l2_prefetch_keys <= 0) return;
  const int len = __ldcg(p.kv.seq_lens + b);  // ld.global.cg: L2 only, no L1 copy
  if (len <= 0 || len > p.max_kv_len) return;
  SplitSpan span;
  if constexpr (kVariants) {  // a window's splits start at its first visible key (decode_key_range)
    const int after = p.keys_after != nullptr ? __ldcg(p.keys_after + b) : 0;
    if (after < 0) return;
    const int edge = window_start_edge(p.num_splits, p.split_tokens, Rows::kBlockKeys, Rows::kChannelKeys);
    const int base = split_base(first_visible_key(len, after, p.q_len, p.window_left), edge);
    span = split_span_from(base, len, split, p.num_splits, p.split_tokens, Rows::kBlockKeys);
  } else {
    span = split_span(len, split, p.num_splits, p.split_tokens, Rows::kBlockKeys);
  }
  const int hi = min(span.end, span.lo + p.l2_prefetch_keys);
  constexpr int64_t kUnit = Rows::kStrideBytes;
  const char* k = static_cast<const char*>(p.kv.k.data) + kv_head * p.kv.k.head_stride * kUnit;
  const char* v = static_cast<const char*>(p.kv.v.data) + kv_head * p.kv.v.head_stride * kUnit;
  for (int t = span.lo + tid; t < hi; t += Rows::kThreads) {
    int64_t page = b;
    int slot = t;
    if (p.kv.block_table != nullptr) {
      const int entry = p.kv.page_size.div(t);
      const int id = __ldcg(p.kv.block_table + b * p.kv.block_table_stride + entry);
      if (id < 0 || id >= p.kv.num_pages) continue;
      page = id;
      slot = t - entry * p.kv.page_size.divisor;
    }
    prefetch_lines_to_l2(k + (page * p.kv.k.block_stride + slot * p.kv.k.token_stride) * kUnit, Rows::kKRowBytes);
    prefetch_lines_to_l2(v + (page * p.kv.v.block_stride + slot * p.kv.v.token_stride) * kUnit, Rows::kVRowBytes);
    if constexpr (Rows::kChannelKeys) {
      if (slot % kKeyGroup == 0) {  // the group's row (its scales are read only once the group is complete)
        prefetch_lines_to_l2(static_cast<const uint16_t*>(p.kv.k_scales.data) + page * p.kv.k_scales.block_stride +
                                 kv_head * p.kv.k_scales.head_stride + (slot / kKeyGroup) * p.kv.k_scales.token_stride,
                             4 * Rows::kHeadDim);
      }
    } else if constexpr (Rows::kTokenScales) {
      constexpr int kPairBytes = 4;  // fp16 (scale, min)
      prefetch_lines_to_l2(static_cast<const uint16_t*>(p.kv.k_scales.data) + page * p.kv.k_scales.block_stride +
                               kv_head * p.kv.k_scales.head_stride + slot * p.kv.k_scales.token_stride,
                           kPairBytes);
    }
    if constexpr (Rows::kTokenScales) {
      constexpr int kPairBytes = 4;  // fp16 (scale, min)
      prefetch_lines_to_l2(static_cast<const uint16_t*>(p.kv.v_scales.data) + page * p.kv.v_scales.block_stride +
                               kv_head * p.kv.v_scales.head_stride + slot * p.kv.v_scales.token_stride,
                           kPairBytes);
    }
  }
#endif
}

}  // namespace splitkv::detail
