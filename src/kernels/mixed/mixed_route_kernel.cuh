// The mixed route's split and merge kernels (mixed_route_params.hpp): one block per sequence,
// plain copies (the attention runs in the decode and prefill kernels between them).
#pragma once

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/mixed/mixed_route_params.hpp"

namespace splitkv::detail {

// Per sequence: every part's lengths, and a decode row's queries in its part's padded batch
// (zeros in front of its q_b queries). Other sequences' slots are not written: the decode kernels
// see them at length 0 and the merge never reads them.
template <class Element>
__global__ void __launch_bounds__(kMixedRouteThreads) mixed_split_kernel(const MixedRouteParams p) {
  wait_for_prior_grids();  // launched with programmatic dependent launch: the inputs may be a kernel's before
  allow_dependent_launch();
  const int b = blockIdx.x;
  const int part = mixed_decode_part(p, b);
  if (threadIdx.x == 0) {
    const int32_t n = p.seq_lens[b];
    for (int k = 0; k < kMixedDecodeParts; ++k) {
      if (p.parts[k].q_max > 0) p.parts[k].seq_lens[b] = part == k ? n : 0;
    }
    p.prefill_seq_lens[b] = part >= 0 ? 0 : n;
  }
  if (part < 0) return;
  const MixedDecodePart& d = p.parts[part];
  const int D = p.head_dim;
  const int64_t row = int64_t(p.num_q_heads) * D;  // one query's elements
  const int q_len = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  const int64_t q0 = p.cu_seqlens_q[b];
  const int pad = d.q_max - q_len;
  const Element* q = static_cast<const Element*>(p.q);
  Element* dst = static_cast<Element*>(d.q) + int64_t(b) * d.q_max * row;
  for (int64_t e = threadIdx.x; e < d.q_max * row; e += blockDim.x) {
    const int i = int(e / row);
    const int h = int(e % row) / D, x = int(e % row) % D;
    dst[e] = i < pad ? Element(0.f) : q[(q0 + i - pad) * p.q_token_stride + h * p.q_head_stride + x];
  }
}

// Per decode row: its q_b output rows (the last q_b of its part's padded batch) and their LSEs into
// the call's rows. The prefill part wrote those rows first (as rows with no keys); this runs after.
template <class Element>
__global__ void __launch_bounds__(kMixedRouteThreads) mixed_merge_kernel(const MixedRouteParams p) {
  wait_for_prior_grids();
  allow_dependent_launch();
  const int b = blockIdx.x;
  const int part = mixed_decode_part(p, b);
  if (part < 0) return;
  const MixedDecodePart& d = p.parts[part];
  const int D = p.head_dim, H = p.num_q_heads;
  const int64_t row = int64_t(H) * D;
  const int q_len = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  const int64_t q0 = p.cu_seqlens_q[b];
  const int pad = d.q_max - q_len;
  const Element* src = static_cast<const Element*>(d.out) + (int64_t(b) * d.q_max + pad) * row;
  Element* out = static_cast<Element*>(p.out);
  for (int64_t e = threadIdx.x; e < q_len * row; e += blockDim.x) {
    const int j = int(e / row);
    const int h = int(e % row) / D, x = int(e % row) % D;
    out[(q0 + j) * p.o_token_stride + h * p.o_head_stride + x] = src[e];
  }
  if (p.lse == nullptr) return;
  for (int e = threadIdx.x; e < q_len * H; e += blockDim.x) {
    const int h = e / q_len, j = e % q_len;
    p.lse[h * p.lse_head_stride + (q0 + j) * p.lse_token_stride] = d.lse[(int64_t(b) * H + h) * d.q_max + pad + j];
  }
}

}  // namespace splitkv::detail
