// Parameters of the kernel that dequantizes a quantized KV cache into a 16-bit staging copy (plain
// host/device struct, no CUDA types; launched through the registry's dequant_kv family). Chunked
// prefill over a quantized cache runs it first and then reads the copy as a contiguous cache
// (docs/ARCHITECTURE.md, "Chunked prefill over a quantized cache").
#pragma once

#include <cstdint>

#include "common/formats.hpp"
#include "kernels/common/kv_cache_view.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

struct DequantKvParams {
  // The cache, as the decode kernels read it (byte strides of the codes; FP8 scales per KV head,
  // INT8/INT4 (scale, min) pairs per token; *_kc keys: pairs per group and the 16-bit tail ring):
  // block table, page size, pool size and each sequence's length included.
  KvCacheView kv;
  CodeKind k_codes = CodeKind::kInt8, v_codes = CodeKind::kInt8;  // never kNative16 here
  // *_kc keys (docs/KV_FORMATS.md, "Keys quantized per channel"): key p of a sequence of length L
  // is read from its codes and its group's per-channel (scale, min) when p < 64 floor(L / 64), else
  // from the sequence's row of kv.k_tail (row p % 128, in the staging dtype).
  bool channel_keys = false;
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
