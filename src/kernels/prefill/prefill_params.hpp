// Plain parameters of the prefill kernels (no CuTe types; filled on the host by the API).
#pragma once

#include <cstdint>

namespace splitkv::detail {

struct PrefillParams {
  // Token t of sequence b, head h: base + b * batch_stride + (cu_seqlens[b] + t) * token_stride
  // + h * head_stride. Padded batches have no cu_seqlens (offset 0); varlen ones batch_stride 0.
  const void* q;
  int64_t q_batch_stride, q_token_stride, q_head_stride;
  const void* k;
  int64_t k_batch_stride, k_token_stride, k_head_stride;
  const void* v;
  int64_t v_batch_stride, v_token_stride, v_head_stride;
  void* out;
  int64_t o_batch_stride, o_token_stride, o_head_stride;
  float* lse;  // optional
  int64_t lse_batch_stride, lse_head_stride, lse_token_stride;

  const int32_t* cu_seqlens_q;  // [batch + 1] or nullptr (padded)
  const int32_t* cu_seqlens_k;
  int64_t total_q, total_k;     // varlen: tokens in the q and k tensors (bounds of cu_seqlens)

  int batch, num_q_heads, num_kv_heads, group;
  int max_q_len, max_kv_len;  // padded: the lengths; varlen: their bounds
  bool causal;
  float scale_log2;  // softmax_scale * log2(e)

  // Split-KV: partials at row = (b * max_q_len + i) * num_q_heads + hq.
  int num_splits;
  float* partial_o;    // [num_splits, rows, D]
  float* partial_lse;  // [num_splits, rows]
  int64_t partial_rows;

  // Two-pass: per-row raw-score max and sum of exp2((s - max) * scale_log2), same row indexing.
  float* row_max;
  float* row_sum;
};

}  // namespace splitkv::detail
