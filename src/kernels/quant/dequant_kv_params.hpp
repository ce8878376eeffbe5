// Parameters of the kernel that dequantizes a quantized KV cache into a 16-bit staging copy (plain
// host/device struct, no CUDA types; launched through the registry's dequant_kv family). Chunked
// prefill over a quantized cache runs it first and then reads the copy as a contiguous cache
// (docs/ARCHITECTURE.md, "Chunked prefill over a quantized cache").
#pragma once

#include <cstdint>

#include "kernels/common/key_tail_view.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

// How one side (K or V) of a quantized cache stores a row (docs/KV_FORMATS.md).
enum class StoredCodes : int32_t { kFp8, kInt8, kInt4 };

struct DequantSide {
  StoredCodes codes = StoredCodes::kInt8;
  const char* cache = nullptr;  // [blocks, slots, Hkv, D] codes
  int64_t block_stride = 0, slot_stride = 0, head_stride = 0;  // bytes (INT4: whole bytes)
  const float* fp8_scales = nullptr;  // FP8: [Hkv]
  int64_t fp8_scale_stride = 0;
  // INT8/INT4: fp16 (scale, min) [blocks, Hkv, slots, 2]; the keys of *_kc: [blocks, Hkv, groups,
  // 2 * D] (scale[D] then min[D]), pair_slot_stride then steps one group.
  const uint16_t* pairs = nullptr;
  int64_t pair_block_stride = 0, pair_head_stride = 0, pair_slot_stride = 0;  // fp16 elements
};

// The keys of a *_kc cache (docs/KV_FORMATS.md, "Keys quantized per channel"): key p of a sequence
// of length L is read from its codes and its group's per-channel (scale, min) when p < 64 floor(L /
// 64) (DequantKvParams::k: INT8 or INT4 codes, pairs per group), else from the sequence's 16-bit
// tail ring (row p % 128, in the staging dtype).
struct DequantKeyChannels {
  bool enabled = false;
  KeyTailView tail;
};

struct DequantKvParams {
  DequantSide k, v;
  DequantKeyChannels key_channels;
  const int32_t* seq_lens = nullptr;  // [batch]: tokens of each sequence in the cache
  const int32_t* block_table = nullptr;  // nullptr: contiguous cache (block = sequence)
  int64_t block_table_stride = 0;
  int page_size = 0;
  int64_t num_pages = 0;
  int batch = 0, num_kv_heads = 0, head_dim = 0;
  int max_kv_len = 0;  // lengths past it are bad input
  DType dtype = DType::kBF16;  // of the staging copy (the problem's Q/O type)
  // Staging: K and V [batch, staging_tokens, Hkv, D] contiguous, and each sequence's length as the
  // prefill kernel will read it: seq_lens[b], or -1 (bad input: the kernel writes NaN rows) when the
  // length is out of range, one of the sequence's page ids is outside the pool, or (*_kc) its tail
  // slot is outside the ring.
  void* k_out = nullptr;
  void* v_out = nullptr;
  int64_t staging_tokens = 0;
  int32_t* lens_out = nullptr;
};

// Tokens of one sequence one block dequantizes (both sides, every KV head).
inline constexpr int kDequantTokensPerBlock = 16;
inline constexpr int kDequantThreads = 256;

}  // namespace splitkv::detail
