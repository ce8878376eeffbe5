// The parts of a decode block that do not depend on how K and V are stored, shared by the 16-bit
// kernel (decode_kernel.cuh) and the quantized-cache kernel (decode_quant/quant_decode_kernel.cuh):
// which keys the block reads, which of them each of a thread's rows sees, and the end of the block
// (the warps' softmax states merged in fixed order and written, or merged across a cluster).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/attention_variants.hpp"
#include "kernels/common/causal_mask.hpp"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/split_rule.hpp"
#include "kernels/decode/cluster_combine.cuh"
#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/fused_merge.cuh"
#include "kernels/decode/warp_merge.cuh"

namespace splitkv::detail {

// The keys [lo, hi) of sequence b that this split reads for packed rows [row0, row0 + rows_here).
struct DecodeKeyRange {
  int len;         // the sequence's length (0 when it was invalid)
  int after;       // keys of the context after this shard (0 without shards)
  int lo, hi;
  bool bad_input;  // the length (or keys_after) was out of range: reported as NaN, never read past
  // kVariants only (set by decode_key_range<.., true>): the sequence's tree-mask rows (null: no tree
  // mask) and its first draft, the key len - q_len (negative when the sequence is shorter than q_len).
  const uint8_t* tree;
  int first_draft;
};

// The kN-key sub-tiles that cover a range's keys [lo, hi): none when it is empty.
template <int kN>
__device__ __forceinline__ int subtile_count(const DecodeKeyRange& keys) {
  return keys.hi > keys.lo ? (keys.hi - keys.lo + kN - 1) / kN : 0;
}

// Where query i's tree-mask bits start in its sequence's rows (keys.tree): an int, where a pointer
// per row would cost the 32-row tile's registers.
__device__ __forceinline__ int tree_row(const DecodeParams& p, int i) { return i * int(p.tree_mask_query_stride); }

// Whether the tree mask hides `key` from the row whose bits start at keys.tree + row: a draft whose
// bit is clear.
__device__ __forceinline__ bool tree_hides(const DecodeKeyRange& keys, int row, int key) {
  return keys.tree != nullptr && key >= keys.first_draft && !tree_mask_sees(keys.tree + row, key - keys.first_draft);
}

// The keys [query_key_start, query_key_end) query i of the sequence sees (of the shard's [0, len)):
// the causal end and, in a variants instance (kVariants), the sliding window's two sides
// (attention_variants.hpp), the query at local position len + after - q_len + i. With a tree mask
// its bits replace the causal rule among the drafts (tree_hides), so the causal end does not apply.
template <bool kVariants>
__device__ __forceinline__ int query_key_end(const DecodeParams& p, int len, int after, int i) {
  if constexpr (!kVariants) {
    return visible_shard_key_end(p.causal, p.q_len, len, after, i);
  } else {
    const int end = p.tree_mask != nullptr ? len : visible_shard_key_end(p.causal, p.q_len, len, after, i);
    const long long position = (long long)len + after - p.q_len + i;
    const long long window_end = window_key_end(position, p.window_right, (long long)len + after);
    return window_end < end ? int(window_end < 0 ? 0 : window_end) : end;
  }
}
template <bool kVariants>
__device__ __forceinline__ int query_key_start(const DecodeParams& p, int len, int after, int i) {
  if constexpr (!kVariants) {
    return 0;
  } else {
    const long long first = window_first_key((long long)len + after - p.q_len + i, p.window_left);
    return first < len ? int(first) : len;
  }
}

template <int kBlockKeys, bool kVariants = false, bool kChannelKeys = false>
__device__ __forceinline__ DecodeKeyRange decode_key_range(const DecodeParams& p, int b, int split, int row0,
                                                           int rows_here) {
  DecodeKeyRange r;
  r.len = p.kv.seq_lens[b];
  r.after = p.keys_after != nullptr ? p.keys_after[b] : 0;
  r.bad_input = r.len < 0 || r.len > p.max_kv_len || r.after < 0;
  if (r.bad_input) r.len = 0, r.after = 0;
  SplitSpan span;
  if constexpr (kVariants) {  // the splits cut only the keys from the first query's window on
    const int edge = window_start_edge(p.num_splits, p.split_tokens, kBlockKeys, kChannelKeys);
    const int base = split_base(first_visible_key(r.len, r.after, p.q_len, p.window_left), edge);
    span = split_span_from(base, r.len, split, p.num_splits, p.split_tokens, kBlockKeys);
  } else {
    span = split_span(r.len, split, p.num_splits, p.split_tokens, kBlockKeys);
  }
  r.lo = span.lo;
  const int last_query = p.group.div(row0 + rows_here - 1);
  r.hi = min(span.end, query_key_end<kVariants>(p, r.len, r.after, last_query));
  if constexpr (kVariants) {
    r.tree = p.tree_mask == nullptr ? nullptr : p.tree_mask + b * p.tree_mask_batch_stride;
    r.first_draft = r.len - p.q_len;
  }
  return r;
}

// Per thread row (2 per 16 rows of the tile): the end of the keys it sees and (kVariants) their
// start and its tree-mask bits. tScS_rc maps (row, col) of the thread's score fragment to (tile
// row, key offset).
template <bool kVariants = false, int kRows, class RowCoords>
__device__ __forceinline__ void visible_row_ends(const DecodeParams& p, const DecodeKeyRange& keys, int row0,
                                                 const RowCoords& tScS_rc, int (&row_end)[kRows],
                                                 int (*row_start)[kRows] = nullptr, int (*row_tree)[kRows] = nullptr) {
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = min(row0 + cute::get<0>(tScS_rc(r, 0)), p.rows_per_kv - 1);
    const int query = p.group.div(row);
    row_end[r] = min(keys.hi, query_key_end<kVariants>(p, keys.len, keys.after, query));
    if constexpr (kVariants) {
      (*row_start)[r] = query_key_start<kVariants>(p, keys.len, keys.after, query);
      (*row_tree)[r] = tree_row(p, query);
    }
  }
}

// Scores of keys at or past a row's end become -inf (only sub-tiles that cross some row's end pay).
template <int kRows, class Scores, class RowCoords>
__device__ __forceinline__ void mask_past_row_ends(Scores& scores, const RowCoords& tScS_rc, int t0, int n_keys,
                                                   const int (&row_end)[kRows]) {
  int first_end = row_end[0];
  CUTE_UNROLL
  for (int r = 1; r < kRows; ++r) first_end = min(first_end, row_end[r]);
  if (t0 + n_keys <= first_end) return;
  CUTE_UNROLL
  for (int r = 0; r < cute::size<0>(scores); ++r) {
    CUTE_UNROLL
    for (int c = 0; c < cute::size<1>(scores); ++c) {
      if (t0 + cute::get<1>(tScS_rc(r, c)) >= row_end[r]) scores(r, c) = kNegInf;
    }
  }
}

// A variants instance's mask: keys before a row's window start, and drafts its tree-mask bits hide,
// become -inf too (only sub-tiles that cross some row's start or end, or reach the drafts of a
// sequence with a tree mask, pay).
template <int kRows, class Scores, class RowCoords>
__device__ __forceinline__ void mask_outside_rows(Scores& scores, const RowCoords& tScS_rc, int t0, int n_keys,
                                                  const int (&row_start)[kRows], const int (&row_end)[kRows],
                                                  const int (&row_tree)[kRows], const DecodeKeyRange& keys) {
  int first_end = row_end[0], last_start = row_start[0];
  CUTE_UNROLL
  for (int r = 1; r < kRows; ++r) first_end = min(first_end, row_end[r]), last_start = max(last_start, row_start[r]);
  const bool drafts = keys.tree != nullptr && t0 + n_keys > keys.first_draft;
  if (t0 + n_keys <= first_end && t0 >= last_start && !drafts) return;
  CUTE_UNROLL
  for (int r = 0; r < cute::size<0>(scores); ++r) {
    CUTE_UNROLL
    for (int c = 0; c < cute::size<1>(scores); ++c) {
      const int key = t0 + cute::get<1>(tScS_rc(r, c));
      if (key >= row_end[r] || key < row_start[r] || tree_hides(keys, row_tree[r], key)) {
        scores(r, c) = kNegInf;
      }
    }
  }
}

// The keys a row does not see become -inf: past its end, and in a variants instance before its
// window start and the drafts its tree mask hides too.
template <bool kVariants, int kRows, class Scores, class RowCoords>
__device__ __forceinline__ void mask_row_keys(Scores& scores, const RowCoords& tScS_rc, int t0, int n_keys,
                                              const int (&row_start)[kRows], const int (&row_end)[kRows],
                                              const int (&row_tree)[kRows], const DecodeKeyRange& keys) {
  if constexpr (kVariants) {
    mask_outside_rows(scores, tScS_rc, t0, n_keys, row_start, row_end, row_tree, keys);
  } else {
    mask_past_row_ends(scores, tScS_rc, t0, n_keys, row_end);
  }
}

// Lets the next kernel in the stream launch (programmatic dependent launch) right away, except with
// a fused combine. Behind a combine kernel an early launch is harmless: the combine lets its own
// dependents launch only once this kernel is done, so the next call's blocks are placed on an
// idle card. With a fused combine the next kernel is the next call's decode kernel itself: launched
// early (at our start, or after our key loops), its blocks were placed beside ours as slots freed
// and read slower, so it launches when this grid is done, at the cost of the launch latency
// (docs/TUNING.md, "Kernels").
__device__ __forceinline__ void allow_dependents_at_start(const DecodeParams& p) {
  if (p.tile_counters == nullptr) allow_dependent_launch();
}

// The end of the block, after every warp stored its state (store_warp_state) and a barrier:
// merges the warps' states row by row and writes the result (final rows, or this split's partial),
// or pushes it into the owners' inboxes for the cluster merge (cluster_inbox: shared memory past
// the merge buffers); with a fused combine the tile's last split block then merges the partials
// (fused_merge.cuh), staged in the kStagingBytes of shared memory at `staging` (the rings and merge
// buffers, free by then). scale_log2 turns the raw scores the warps kept into log2 units; out_scale
// multiplies O (an FP8 cache's V scale). kSinks (a variants instance): final rows fold p.sinks, when
// set, into O and the LSE (fold_sink), as the combine kernel does after a merge: a single split's
// rows here, a cluster's merged rows in merge_cluster_inbox.
template <class Element, int kWarps, int kM, int kHeadDim, int kThreads, int kStagingBytes, bool kSinks = false>
__device__ __forceinline__ void finish_decode_block(const DecodeParams& p, const WarpMergeSmem<kWarps, kM, kHeadDim>& merge,
                                                    char* cluster_inbox, char* staging, bool poisoned, int b,
                                                    int kv_head, int split, int row0, int rows_here, float scale_log2,
                                                    float out_scale) {
  const ClusterInbox<kM, kHeadDim> inbox(cluster_inbox);
  if (p.cluster_combine) wait_until_rings_done_in_cluster();
  for (int idx = threadIdx.x; idx < kM * kHeadDim / 4; idx += kThreads) {
    const int r = idx / (kHeadDim / 4), c = idx % (kHeadDim / 4) * 4;
    if (r >= rows_here) continue;
    float o[4];
    const float lse = merge_warp_states<kWarps, kM, kHeadDim>(merge, r, c, scale_log2, o);
#pragma unroll
    for (int j = 0; j < 4; ++j) o[j] *= out_scale;
    if (p.cluster_combine) {
      const float nan = kOutputNaN;
      push_to_owner(p, inbox, r, c / 4, poisoned ? make_float4(nan, nan, nan, nan) : make_float4(o[0], o[1], o[2], o[3]),
                    poisoned ? nan : lse);
    } else {
      const PackedRow at = packed_row(p, kv_head, row0 + r);
      const OutputRow where{b, at.query, at.query, at.head, split};
      float row_lse = lse;
      if constexpr (kSinks) {
        if (p.sinks != nullptr) {
          const float weight = fold_sink(p.sinks[at.head * p.sinks_stride], &row_lse);
#pragma unroll
          for (int j = 0; j < 4; ++j) o[j] *= weight;
        }
      }
      write_output<Element, kHeadDim>(p.output, where, c, o, row_lse, c == 0, poisoned);
    }
  }
  if (p.cluster_combine) {
    merge_cluster_inbox<Element, kM, kHeadDim, kThreads, kSinks>(p, inbox, b, kv_head, row0, rows_here);
  } else if (p.tile_counters != nullptr) {
    const int64_t tile = (int64_t(b) * p.num_kv_heads + kv_head) * p.m_tiles.divisor + row0 / kM;
    merge_if_last_split<Element, kHeadDim, kThreads, kStagingBytes>(p, tile, b, kv_head, row0, rows_here, staging);
  }
}

// A block that reads no key (a zero-length sequence, or a split past its sequence's keys) and
// writes its own rows (no cluster or fused merge) skips the key loop and the warp merge: its rows
// are what merging empty warp states gives, O = 0 and LSE = -inf, with a final row's sink folded
// in (write_rows_of_no_key). The mixed route's decode parts have many such blocks: their slots past
// the members (docs/MIXED_BATCH.md). Uniform over the block: every thread has the same key range.
__device__ __forceinline__ bool block_reads_no_key(const DecodeParams& p, const DecodeKeyRange& keys) {
  return keys.hi <= keys.lo && !keys.bad_input && !p.cluster_combine && p.tile_counters == nullptr;
}

// The block's Q tile copy (its only cp.async group in flight) is awaited first: the block then
// exits.
template <class Element, int kM, int kHeadDim, int kThreads, bool kSinks = false>
__device__ __forceinline__ void write_rows_of_no_key(const DecodeParams& p, int b, int kv_head, int split, int row0,
                                                     int rows_here) {
  cute::cp_async_wait<0>();
  for (int idx = threadIdx.x; idx < kM * kHeadDim / 4; idx += kThreads) {
    const int r = idx / (kHeadDim / 4), c = idx % (kHeadDim / 4) * 4;
    if (r >= rows_here) continue;
    float o[4] = {0.f, 0.f, 0.f, 0.f};
    float row_lse = kNegInf;
    const PackedRow at = packed_row(p, kv_head, row0 + r);
    if constexpr (kSinks) {
      if (p.sinks != nullptr) fold_sink(p.sinks[at.head * p.sinks_stride], &row_lse);  // weight 0: O stays 0
    }
    write_output<Element, kHeadDim>(p.output, OutputRow{b, at.query, at.query, at.head, split}, c, o, row_lse, c == 0,
                                    false);
  }
}

// finish_decode_block as a call: its code (cluster and fused merges) then takes no part in the
// register allocation of the kernel's key loop. For a kernel at its register bound, where the
// inlined epilogue tipped ptxas into spilling inside the loop: the INT4 16-row kernel (168
// registers for three blocks per SM) spilled inside its key loop once the fused merge was staged
// (docs/TUNING.md, "Kernels").
template <class Element, int kWarps, int kM, int kHeadDim, int kThreads, int kStagingBytes, bool kSinks = false>
__device__ __noinline__ void finish_decode_block_out_of_line(const DecodeParams& p,
                                                             const WarpMergeSmem<kWarps, kM, kHeadDim>& merge,
                                                             char* cluster_inbox, char* staging, bool poisoned, int b,
                                                             int kv_head, int split, int row0, int rows_here,
                                                             float scale_log2, float out_scale) {
  finish_decode_block<Element, kWarps, kM, kHeadDim, kThreads, kStagingBytes, kSinks>(
      p, merge, cluster_inbox, staging, poisoned, b, kv_head, split, row0, rows_here, scale_log2, out_scale);
}

}  // namespace splitkv::detail
