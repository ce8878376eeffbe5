// The mixed route's split and merge kernels (mixed_route_params.hpp): one block per sequence,
// plain copies (the attention runs in the decode and prefill kernels between them).
#pragma once

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/mixed/mixed_route_params.hpp"

namespace splitkv::detail {

// Per sequence: both parts' lengths, and the padded decode batch's queries (zeros in front of a
// decode row's q_b queries; all zeros for a sequence the prefill part serves).
template <class Element>
__global__ void __launch_bounds__(kMixedRouteThreads) mixed_split_kernel(const MixedRouteParams p) {
  wait_for_prior_grids();  // launched with programmatic dependent launch: the inputs may be a kernel's before
  allow_dependent_launch();
  const int b = blockIdx.x;
  const bool decode = mixed_decode_row(p, b);
  if (threadIdx.x == 0) {
    const int32_t n = p.seq_lens[b];
    p.dec_seq_lens[b] = decode ? n : 0;
    p.prefill_seq_lens[b] = decode ? 0 : n;
  }
  const int D = p.head_dim;
  const int64_t row = int64_t(p.num_q_heads) * D;  // one query's elements
  const int q_len = decode ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : 0;
  const int64_t q0 = decode ? p.cu_seqlens_q[b] : 0;
  const int pad = p.decode_q - q_len;
  const Element* q = static_cast<const Element*>(p.q);
  Element* dst = static_cast<Element*>(p.dec_q) + int64_t(b) * p.decode_q * row;
  for (int64_t e = threadIdx.x; e < p.decode_q * row; e += blockDim.x) {
    const int i = int(e / row);
    const int h = int(e % row) / D, d = int(e % row) % D;
    dst[e] = i < pad ? Element(0.f) : q[(q0 + i - pad) * p.q_token_stride + h * p.q_head_stride + d];
  }
}

// Per decode row: its q_b output rows (the last q_b of the padded batch) and their LSEs into the
// call's rows. The prefill part wrote those rows first (as rows with no keys); this runs after it.
template <class Element>
__global__ void __launch_bounds__(kMixedRouteThreads) mixed_merge_kernel(const MixedRouteParams p) {
  wait_for_prior_grids();
  allow_dependent_launch();
  const int b = blockIdx.x;
  if (!mixed_decode_row(p, b)) return;
  const int D = p.head_dim, H = p.num_q_heads;
  const int64_t row = int64_t(H) * D;
  const int q_len = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  const int64_t q0 = p.cu_seqlens_q[b];
  const int pad = p.decode_q - q_len;
  const Element* src = static_cast<const Element*>(p.dec_out) + (int64_t(b) * p.decode_q + pad) * row;
  Element* out = static_cast<Element*>(p.out);
  for (int64_t e = threadIdx.x; e < q_len * row; e += blockDim.x) {
    const int j = int(e / row);
    const int h = int(e % row) / D, d = int(e % row) % D;
    out[(q0 + j) * p.o_token_stride + h * p.o_head_stride + d] = src[e];
  }
  if (p.lse == nullptr) return;
  for (int e = threadIdx.x; e < q_len * H; e += blockDim.x) {
    const int h = e / q_len, j = e % q_len;
    p.lse[h * p.lse_head_stride + (q0 + j) * p.lse_token_stride] =
        p.dec_lse[(int64_t(b) * H + h) * p.decode_q + pad + j];
  }
}

}  // namespace splitkv::detail
