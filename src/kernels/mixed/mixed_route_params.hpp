// Parameters of the mixed route's two small kernels (docs/MIXED_BATCH.md, "The mixed route"): a
// serving step's varlen batch over one decode cache is served by the decode kernels for its decode
// rows and by the chunked-prefill kernels for its chunks, side by side. The split kernel runs first:
// per sequence it decides the kind, writes each part's lengths (a sequence the other part serves
// gets length 0 there) and copies a decode row's queries into a padded decode batch; the merge
// kernel runs after both parts and copies the decode rows' outputs into the call's rows. Plain
// host/device struct, no CUDA types.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace splitkv::detail {

enum class MixedRouteStage : int32_t { kSplit = 0, kMerge = 1 };

struct MixedRouteParams {
  MixedRouteStage stage = MixedRouteStage::kSplit;
  // The step: sequence b has cu_seqlens_q[b + 1] - cu_seqlens_q[b] queries over seq_lens[b] keys.
  const int32_t* cu_seqlens_q = nullptr;  // [batch + 1]
  const int32_t* seq_lens = nullptr;      // [batch]
  int batch = 0, num_q_heads = 0, head_dim = 0;
  int64_t total_q = 0;  // query tokens in q (bound of cu_seqlens_q)
  int max_kv_len = 0;
  int decode_q = 1;  // a sequence of 1..decode_q queries (with a valid length) is a decode row
  // The call's queries and outputs, varlen: q, out [total_q, Hq, D]; lse [Hq, total_q] or null.
  // Element strides.
  const void* q = nullptr;
  int64_t q_token_stride = 0, q_head_stride = 0;
  void* out = nullptr;
  int64_t o_token_stride = 0, o_head_stride = 0;
  float* lse = nullptr;
  int64_t lse_head_stride = 0, lse_token_stride = 0;
  // The decode part's batch (workspace, contiguous): q and out [batch, decode_q, Hq, D], lse
  // [batch, Hq, decode_q]; a decode row's queries take its last q_b positions (bottom-right, as
  // the decode kernels align a sequence's queries), zeros before them.
  void* dec_q = nullptr;
  const void* dec_out = nullptr;
  const float* dec_lse = nullptr;
  int32_t* dec_seq_lens = nullptr;      // [batch]: seq_lens[b] for a decode row, else 0
  int32_t* prefill_seq_lens = nullptr;  // [batch]: 0 for a decode row, else seq_lens[b]
};

// Whether sequence b is a decode row: 1..decode_q queries inside the q tensor over a length the
// decode kernels take (q_b <= n_b <= max_kv_len). A sequence with bad lengths stays with the
// prefill kernels, which write its rows as NaN.
SPLITKV_HD bool mixed_decode_row(const MixedRouteParams& p, int b) {
  const int64_t q0 = p.cu_seqlens_q[b], q1 = p.cu_seqlens_q[b + 1];
  const int64_t q_len = q1 - q0, n = p.seq_lens[b];
  return q0 >= 0 && q1 <= p.total_q && q_len >= 1 && q_len <= p.decode_q && n >= q_len && n <= p.max_kv_len;
}

inline constexpr int kMixedRouteThreads = 256;

}  // namespace splitkv::detail
