// The global-memory views prefill_sm90 loads Q, K and V through by TMA, as plain extents and
// strides (no CuTe): one spelling for the launcher, which encodes them, and for run_prefill, which
// refuses by name the tensors TMA cannot take before anything is launched.
//
// Each view is (tokens, head dim, heads, slots) with element strides (token, 1, head, slot). A
// TMA descriptor takes a stride only if it is > 0, a multiple of 16 bytes and below 2^40 bytes. A
// dimension of extent 1 is never stepped over, so any stride is correct for it; it gets the span of
// the dimensions before it, which TMA takes whenever those dimensions' strides are legal.
#pragma once

#include <cstdint>

#include "kernels/prefill/prefill_params.hpp"

namespace splitkv::detail {

struct TmaView {
  int64_t extent[4];
  int64_t stride[4];
  // The caller's tensor dimension each view dimension comes from (-1: none, e.g. the varlen slot),
  // for naming a stride in errors.
  int tensor_dim[4];
};

// Replaces the stride of each extent-1 dimension by the span of the dimensions before it (a single
// token: the row's length).
inline TmaView normalized(TmaView v) {
  if (v.extent[0] == 1) v.stride[0] = v.extent[1];
  for (int i = 2; i < 4; ++i) {
    if (v.extent[i] != 1) continue;
    int64_t span = 1;
    for (int j = 0; j < i; ++j) span = v.stride[j] * v.extent[j] > span ? v.stride[j] * v.extent[j] : span;
    v.stride[i] = span;
  }
  return v;
}

// The first dimension whose stride TMA cannot encode (-1: none). The head dim (1) is contiguous.
inline int first_untmaable_dim(const TmaView& v, int element_bytes) {
  for (int i = 0; i < 4; ++i) {
    if (i == 1) continue;
    const int64_t bytes = v.stride[i] * element_bytes;
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t(1) << 40)) return i;
  }
  return -1;
}

enum class TmaOperand { kQ, kK, kV };

// Token tensors (padded [B, L, H, D] or varlen [total, H, D]) or a contiguous cache ([B, capacity,
// Hkv, D], read as padded K/V).
inline TmaView tma_token_view(const PrefillParams& p, TmaOperand which, int head_dim) {
  const bool is_q = which == TmaOperand::kQ;
  const bool varlen = is_q ? p.cu_seqlens_q != nullptr : p.cu_seqlens_k != nullptr;
  const int64_t tokens = is_q ? (varlen ? p.total_q : p.max_q_len) : (varlen ? p.total_k : p.max_kv_len);
  const int heads = is_q ? p.num_q_heads : p.num_kv_heads;
  const int64_t token_stride = is_q ? p.q_token_stride : which == TmaOperand::kK ? p.kv.k.token_stride : p.kv.v.token_stride;
  const int64_t head_stride = is_q ? p.q_head_stride : which == TmaOperand::kK ? p.kv.k.head_stride : p.kv.v.head_stride;
  const int64_t batch_stride = is_q ? p.q_batch_stride : which == TmaOperand::kK ? p.kv.k.block_stride : p.kv.v.block_stride;
  TmaView v{};
  v.extent[0] = tokens, v.extent[1] = head_dim, v.extent[2] = heads, v.extent[3] = varlen ? 1 : p.batch;
  v.stride[0] = token_stride, v.stride[1] = 1, v.stride[2] = head_stride, v.stride[3] = varlen ? 0 : batch_stride;
  // Padded [B, L, H, D]: tokens are dim 1, heads 2, slots 0. Varlen [total, H, D]: tokens 0, heads 1.
  v.tensor_dim[0] = varlen ? 0 : 1, v.tensor_dim[1] = -1, v.tensor_dim[2] = varlen ? 1 : 2;
  v.tensor_dim[3] = varlen ? -1 : 0;
  return normalized(v);
}

// A paged cache [pages, page_size, Hkv, D] as (page_size, D, Hkv, pages).
inline TmaView tma_page_view(const PrefillParams& p, TmaOperand which, int head_dim) {
  const bool is_k = which == TmaOperand::kK;
  TmaView v{};
  v.extent[0] = p.kv.page_size.divisor, v.extent[1] = head_dim, v.extent[2] = p.num_kv_heads, v.extent[3] = p.kv.num_pages;
  v.stride[0] = is_k ? p.kv.k.token_stride : p.kv.v.token_stride, v.stride[1] = 1;
  v.stride[2] = is_k ? p.kv.k.head_stride : p.kv.v.head_stride, v.stride[3] = is_k ? p.kv.k.block_stride : p.kv.v.block_stride;
  v.tensor_dim[0] = 1, v.tensor_dim[1] = -1, v.tensor_dim[2] = 2, v.tensor_dim[3] = 0;
  return normalized(v);
}

}  // namespace splitkv::detail
