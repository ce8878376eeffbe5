// Parameters of the append kernels (plain host/device structs, no CUDA types); run_append_kv
// launches them through the registry's append_kv family.
#pragma once

#include <cstdint>

#include "common/formats.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

struct AppendSideParams {
  CodeKind format = CodeKind::kNative16;  // how the cache side stores a row
  const void* src = nullptr;  // new rows [num_tokens, Hkv, D], 16-bit
  int64_t src_token_stride = 0, src_head_stride = 0;  // elements
  char* cache = nullptr;      // [blocks, slots, Hkv, D] values or codes
  int64_t cache_block_stride = 0, cache_slot_stride = 0, cache_head_stride = 0;  // bytes (INT4: whole bytes)
  const float* fp8_scales = nullptr;  // FP8: [Hkv]
  int64_t fp8_scale_stride = 0;
  // INT: fp16 (scale, min) [blocks, Hkv, slots, 2]; the keys of *_kc: [blocks, Hkv, groups, 2 * D]
  // (scale[D] then min[D]), pair_slot_stride then steps one group.
  uint16_t* pairs = nullptr;
  int64_t pair_block_stride = 0, pair_head_stride = 0, pair_slot_stride = 0;  // fp16 elements
};

// The keys of a *_kc cache (docs/KV_FORMATS.md, "Keys quantized per channel"): each token's place
// in its sequence and the sequence's row of the 16-bit tail ring. The codes and per-group (scale,
// min) the group kernel writes when a token completes a group of 64 positions are p.k's cache and
// pairs (INT8 or INT4).
struct AppendKcParams {
  bool enabled = false;             // a *_kc cache
  const void* positions = nullptr;  // int64, or int32 when !positions_64 [num_tokens]
  bool positions_64 = true;
  int64_t positions_stride = 0;
  const int32_t* tail_slots = nullptr;  // [num_tokens]
  int64_t tail_slots_stride = 0;
  int64_t num_tail_slots = 0;
  char* tail = nullptr;  // [tail slots, Hkv, 128, D] in the new rows' dtype
  int64_t tail_slot_stride = 0, tail_head_stride = 0, tail_row_stride = 0;  // bytes
};

struct AppendKvParams {
  AppendSideParams k, v;
  AppendKcParams kc;
  const void* slots = nullptr;  // int64, or int32 when !slots_64
  bool slots_64 = true;
  int64_t slots_stride = 0;
  int64_t num_tokens = 0;
  int num_kv_heads = 0;
  int64_t slots_per_block = 0;  // page_size, or the capacity of a contiguous cache
  int64_t num_slots = 0;        // blocks * slots_per_block: slots at or beyond it are skipped
  DType dtype = DType::kBF16;   // of the new rows
  int head_dim = 0;             // 64, 128 or 256
};

// One warp per (token, K or V, KV head) row, this many rows a block.
inline constexpr int kAppendWarpsPerBlock = 4;
// *_kc: one block of this many threads per (token, KV head) quantizes the group the token completes.
inline constexpr int kAppendKcThreads = 128;

}  // namespace splitkv::detail
