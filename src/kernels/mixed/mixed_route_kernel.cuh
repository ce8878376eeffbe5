// The mixed route's split and merge kernels (mixed_route_params.hpp): one block per sequence,
// plain copies in 16-byte vectors (the attention runs in the decode and prefill kernels between
// them).
#pragma once

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/mixed/mixed_route_params.hpp"

namespace splitkv::detail {

// Elements of a 16-byte vector: the copies move whole vectors (validation makes every query and
// output row 16-byte aligned, head_dim a multiple of 8).
template <class Element>
inline constexpr int kVectorElements = 16 / int(sizeof(Element));

// A decode row's queries: where they start in the call (q0), how many (q_len), and the zero rows in
// front of them in its part's padded batch of q_max (pad).
struct MixedRowQueries {
  int64_t q0;
  int q_len, pad;
};
__device__ __forceinline__ MixedRowQueries mixed_row_queries(const MixedRouteParams& p, const MixedDecodePart& d,
                                                             int b) {
  const int q_len = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  return {p.cu_seqlens_q[b], q_len, d.q_max - q_len};
}

// Vector e of a walk over [queries, heads, head_dim] in 16-byte vectors (`vectors` per head row):
// its query, head and first element in the head row.
struct VectorAt {
  int query, head, x;
};
template <class Element>
__device__ __forceinline__ VectorAt vector_at(int e, int num_heads, int vectors) {
  const int row = num_heads * vectors;  // vectors per query
  return {e / row, e % row / vectors, e % vectors * kVectorElements<Element>};
}

// Sequence b's member counts (mixed_member_count) over the whole block: the block's threads each
// count a stride, then add up in shared memory. Every thread gets the sums.
__device__ __forceinline__ MixedMemberCount block_member_count(const MixedRouteParams& p, int b) {
  __shared__ int s_counts[2 * kMixedDecodeParts];
  if (threadIdx.x < 2 * kMixedDecodeParts) s_counts[threadIdx.x] = 0;
  __syncthreads();
  const MixedMemberCount mine = mixed_member_count(p, b, threadIdx.x, blockDim.x);
  for (int k = 0; k < kMixedDecodeParts; ++k) {
    if (mine.before[k] != 0) atomicAdd(&s_counts[k], mine.before[k]);
    if (mine.total[k] != 0) atomicAdd(&s_counts[kMixedDecodeParts + k], mine.total[k]);
  }
  __syncthreads();
  MixedMemberCount all;
  for (int k = 0; k < kMixedDecodeParts; ++k) {
    all.before[k] = s_counts[k];
    all.total[k] = s_counts[kMixedDecodeParts + k];
  }
  return all;
}

// Per sequence: its part and slot there; every part's length at slot b where b is past the part's
// members (0); a member's length, block-table row and queries at its slot (zeros in
// front of its q_b queries in the padded batch); the prefill part's length and skip flag. Block 0
// also sets how many blocks the prefill part's persistent grid runs (all where no row is a
// decode part's).
template <class Element>
__global__ void __launch_bounds__(kMixedRouteThreads) mixed_split_kernel(const MixedRouteParams p) {
  wait_for_prior_grids();  // launched with programmatic dependent launch: the inputs may be a kernel's before
  allow_dependent_launch();
  const int b = blockIdx.x;
  const int part = mixed_decode_part(p, b);
  const MixedMemberCount count = block_member_count(p, b);
  const int slot = part >= 0 ? count.before[part] : -1;
  if (threadIdx.x == 0) {
    const int32_t n = p.seq_lens[b];
    for (int k = 0; k < kMixedDecodeParts; ++k) {
      const MixedDecodePart& d = p.parts[k];
      if (d.q_max == 0 || b < count.total[k]) continue;
      d.seq_lens[b] = 0;  // an empty slot
    }
    if (part >= 0) {
      const MixedDecodePart& d = p.parts[part];
      d.seq_lens[slot] = n;
      p.slots[b] = slot;
    }
    p.prefill_seq_lens[b] = part >= 0 ? 0 : n;
    p.prefill_skip[b] = part >= 0 ? 1 : 0;
    if (b == 0 && p.prefill_blocks != nullptr) {
      int members = 0;
      for (int k = 0; k < kMixedDecodeParts; ++k) members += count.total[k];
      *p.prefill_blocks = members > 0 ? p.prefill_blocks_beside : p.prefill_blocks_alone;
    }
  }
  if (part < 0) return;
  const MixedDecodePart& d = p.parts[part];
  // The member's pages (a valid length: n <= max_kv_len, so at most table_pages of them).
  const int pages = (p.seq_lens[b] + p.page_size - 1) / p.page_size;
  for (int j = threadIdx.x; j < pages; j += blockDim.x) {
    d.block_table[int64_t(slot) * p.table_pages + j] = p.block_table[int64_t(b) * p.block_table_stride + j];
  }
  const int vectors = p.head_dim / kVectorElements<Element>;  // 16-byte vectors per head row
  const MixedRowQueries rows = mixed_row_queries(p, d, b);
  const Element* q = static_cast<const Element*>(p.q);
  uint4* dst =
      reinterpret_cast<uint4*>(static_cast<Element*>(d.q) + int64_t(slot) * d.q_max * p.num_q_heads * p.head_dim);
  for (int e = threadIdx.x; e < d.q_max * p.num_q_heads * vectors; e += blockDim.x) {
    const VectorAt v = vector_at<Element>(e, p.num_q_heads, vectors);
    dst[e] = v.query < rows.pad ? make_uint4(0, 0, 0, 0)
                                : *reinterpret_cast<const uint4*>(q + (rows.q0 + v.query - rows.pad) * p.q_token_stride +
                                                                  v.head * p.q_head_stride + v.x);
  }
}

// Per decode row: its q_b output rows (the last q_b of its slot in its part's padded batch) and their
// LSEs into the call's rows. It runs after the join: a prefill part's combine may have written those
// rows first.
template <class Element>
__global__ void __launch_bounds__(kMixedRouteThreads) mixed_merge_kernel(const MixedRouteParams p) {
  wait_for_prior_grids();
  allow_dependent_launch();
  const int b = blockIdx.x;
  const int part = mixed_decode_part(p, b);
  if (part < 0) return;
  const MixedDecodePart& d = p.parts[part];
  const int H = p.num_q_heads;
  const int vectors = p.head_dim / kVectorElements<Element>;  // 16-byte vectors per head row
  const MixedRowQueries rows = mixed_row_queries(p, d, b);
  const int slot = p.slots[b];
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const Element*>(d.out) +
                                                    (int64_t(slot) * d.q_max + rows.pad) * H * p.head_dim);
  Element* out = static_cast<Element*>(p.out);
  for (int e = threadIdx.x; e < rows.q_len * H * vectors; e += blockDim.x) {
    const VectorAt v = vector_at<Element>(e, H, vectors);
    *reinterpret_cast<uint4*>(out + (rows.q0 + v.query) * p.o_token_stride + v.head * p.o_head_stride + v.x) = src[e];
  }
  if (p.lse == nullptr) return;
  for (int e = threadIdx.x; e < rows.q_len * H; e += blockDim.x) {
    const int h = e / rows.q_len, j = e % rows.q_len;
    p.lse[h * p.lse_head_stride + (rows.q0 + j) * p.lse_token_stride] =
        d.lse[(int64_t(slot) * H + h) * d.q_max + rows.pad + j];
  }
}

}  // namespace splitkv::detail
