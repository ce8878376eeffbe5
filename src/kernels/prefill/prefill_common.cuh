// Pieces shared by the prefill kernels: which tokens a block owns, masking, MMA from shared
// memory, and the row writer over the common epilogue.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/array.h>

#include "kernels/common/attention_variants.hpp"
#include "kernels/common/causal_mask.hpp"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/mma_layouts.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/split_rule.hpp"
#include "kernels/common/varlen_rows.hpp"
#include "kernels/prefill/prefill_params.hpp"

namespace splitkv::detail {

// Where sequence b lives in the q/k tensors. Invalid cu_seqlens (device data the host could not
// check) make `bad`: the block then reads no key and writes NaN to the rows it can address.
struct PrefillSequence {
  int64_t q_begin = 0, k_begin = 0;  // token offsets (varlen) or 0 (padded)
  int q_len = 0, k_len = 0;
  bool bad = false;
};

// The mixed route's prefill part over a step with no sequence of its own (every one skipped): a
// persistent block returns at once instead of walking a tile per sequence and KV head. Every
// thread of the block calls it (a block-wide vote).
__device__ __forceinline__ bool every_sequence_skipped(const PrefillParams& p) {
  if (p.skip_sequences == nullptr) return false;
  bool any = false;
  for (int b = int(threadIdx.x); b < p.batch; b += int(blockDim.x)) any |= p.skip_sequences[b] == 0;
  return !__syncthreads_or(any);
}

__device__ __forceinline__ PrefillSequence resolve_sequence(const PrefillParams& p, int b) {
  PrefillSequence s;
  if (p.cu_seqlens_q == nullptr) {
    s.q_len = p.max_q_len;
  } else {
    const VarlenRows rows = varlen_rows(p.cu_seqlens_q, b, p.total_q, p.max_q_len);
    s.bad = rows.bad;
    s.q_begin = rows.begin;
    s.q_len = rows.len;
  }
  if (p.skip_sequences != nullptr && p.skip_sequences[b] != 0) s.q_len = 0;  // another part's rows
  int64_t k0 = 0, k1 = p.max_kv_len;  // padded K/V tokens
  if (p.kv.seq_lens != nullptr) {  // a decode cache: the sequence's first seq_lens[b] tokens
    k1 = p.kv.seq_lens[b];
    s.bad |= k1 < 0 || k1 > p.max_kv_len;
  } else if (p.cu_seqlens_k != nullptr) {  // varlen K/V tokens
    k0 = p.cu_seqlens_k[b];
    k1 = p.cu_seqlens_k[b + 1];
    s.bad |= k0 < 0 || k1 < k0 || k1 > p.total_k || k1 - k0 > p.max_kv_len;
  }
  s.k_begin = s.bad ? 0 : k0;
  s.k_len = s.bad ? 0 : int(k1 - k0);
  return s;
}

// Whether sequence b has query rows in this call (resolve_sequence's q_len > 0), from its query
// lengths and skip flag alone.
__device__ __forceinline__ bool sequence_has_rows(const PrefillParams& p, int b) {
  if (p.skip_sequences != nullptr && p.skip_sequences[b] != 0) return false;
  if (p.cu_seqlens_q == nullptr) return p.max_q_len > 0;
  return varlen_rows(p.cu_seqlens_q, b, p.total_q, p.max_q_len).len > 0;
}

// Whether every page id the keys [lo, hi) of sequence b use is in the pool; block-wide (every
// thread of the block must call it). A page id outside the pool is never dereferenced: the block
// then reads no key and writes NaN rows, as for any invalid device data. (prefill_sm90 checks the
// page ids its producer reads instead: its roles never meet at one block barrier.)
__device__ __forceinline__ bool pages_in_pool(const PrefillParams& p, int b, int lo, int hi) {
  bool bad = false;
  if (hi > lo) {
    const int32_t* row = p.kv.block_table + b * p.kv.block_table_stride;
    for (int j = lo / p.kv.page_size.divisor + int(threadIdx.x); j <= (hi - 1) / p.kv.page_size.divisor; j += int(blockDim.x)) {
      bad |= row[j] < 0 || row[j] >= p.kv.num_pages;
    }
  }
  return !__syncthreads_or(bad);
}

// Query i's position among its sequence's keys (bottom-right, as the causal rule), and the first
// key and the end of the keys its sliding window leaves visible, within [0, k_len] (docs/VARIANTS.md).
__device__ __forceinline__ long long query_position(const PrefillSequence& s, int i) {
  return (long long)s.k_len - s.q_len + i;
}
__device__ __forceinline__ int window_start_at(const PrefillParams& p, const PrefillSequence& s, long long position) {
  return int(min(window_first_key(position, p.window_left), (long long)s.k_len));
}
__device__ __forceinline__ int window_end_at(const PrefillParams& p, const PrefillSequence& s, long long position) {
  return int(window_key_end(position, p.window_right, s.k_len));
}

// Where a sequence's tree-mask rows are (PrefillParams::tree_mask), for mask_hidden_drafts:
// query i's bits start at rows + i * query_stride; the drafts are keys [first_draft, first_draft + q_len).
struct DraftTree {
  const uint8_t* rows;
  int64_t query_stride;
  int q_len, first_draft;
};

// The drafts (q_len <= kMaxPrefillTreeDrafts) the tree mask hides from query i, as bits (bit j:
// draft j). One 64-bit word per row, where a byte per score would hold a register each.
__device__ __forceinline__ uint64_t tree_hidden_drafts(const DraftTree& tree, int i) {
  if (i >= tree.q_len) return 0;
  const uint8_t* row = tree.rows + i * tree.query_stride;
  uint64_t seen = 0;
  CUTE_UNROLL
  for (int j = 0; j < kMaxPrefillTreeDrafts / 8; ++j) {
    if (8 * j < tree.q_len) seen |= uint64_t(row[j]) << (8 * j);
  }
  return ~seen;
}
__device__ __forceinline__ bool draft_hidden(uint64_t hidden, int draft) {
  return draft >= 0 && draft < kMaxPrefillTreeDrafts && ((hidden >> draft) & 1);
}

// Keys [lo, hi) that query rows [row0, row0 + rows) read in KV split `split`; mask_from: the
// first key some row of the block must not see (blocks ending past it need masking). With a
// sliding window (kVariants), mask_until: the last row's first key (blocks starting before it need
// the window's left mask), and lo starts at the first row's window, on a block_n edge. With a tree
// mask (kTree; causal is then off: its bits replace the causal rule) blocks from the first draft need masking.
struct KeyRange {
  int lo = 0, hi = 0, mask_from = 0;
  int mask_until = 0;  // kVariants only
};

template <bool kVariants = false, bool kTree = false>
__device__ __forceinline__ KeyRange key_range(const PrefillParams& p, const PrefillSequence& s, int split,
                                              int row0, int rows, int block_n) {
  KeyRange r;
  const SplitSpan span = split_span(s.k_len, split, p.num_splits, 0, block_n);
  r.lo = span.lo;
  r.hi = min(span.end, visible_key_end(p.causal, s.q_len, s.k_len, row0 + rows - 1));
  r.mask_from = min(r.hi, visible_key_end(p.causal, s.q_len, s.k_len, row0));
  if constexpr (kVariants) {
    // A tree mask comes with causal off (launch_prefill): the blocks from the first draft need masking.
    if (kTree && p.tree_mask != nullptr) r.mask_from = min(r.mask_from, max(s.k_len - s.q_len, 0));
    const long long first_pos = query_position(s, row0);
    const long long last_pos = first_pos + rows - 1;
    r.lo = max(r.lo, window_start_at(p, s, first_pos) / block_n * block_n);
    r.hi = min(r.hi, window_end_at(p, s, last_pos));
    r.mask_from = min(r.mask_from, window_end_at(p, s, first_pos));
    r.mask_from = min(r.mask_from, r.hi);
    r.mask_until = window_start_at(p, s, last_pos);
  }
  return r;
}

// What one prefill thread block owns: grid position, its sequence, query rows and keys, and the
// global base addresses of its Q rows and of its KV head.
template <class Element>
struct PrefillBlock {
  int hq, b, split, kv_head;
  PrefillSequence seq;
  int row0, rows_here;  // query rows [row0, row0 + rows_here) of the sequence
  KeyRange keys;
  int n_blocks;         // main-loop steps of block_n keys
  const Element* q_base;
  const Element* k_base;
  const Element* v_base;

  // The block's own tile (blockIdx); false when the sequence has no rows for this block (the block
  // has nothing to do). Block-wide: every thread must call it (the page check is a block barrier).
  template <bool kVariants = false>
  __device__ __forceinline__ bool init(const PrefillParams& p, int block_m, int block_n) {
    if (!init_tile<kVariants>(p, block_m, block_n, blockIdx.x, gridDim.x, blockIdx.y, blockIdx.z)) return false;
    // Paged cache: the tiles read keys [lo, lo + n_blocks * block_n) up to the sequence's end.
    if (p.kv.block_table != nullptr && !pages_in_pool(p, b, keys.lo, min(seq.k_len, keys.lo + n_blocks * block_n))) {
      seq.bad = true;
      seq.k_len = 0;
      keys = KeyRange{};
      n_blocks = 0;
    }
    return true;
  }

  // The tile at (x, hq, z) of a grid (tiles_m, Hq, batch x splits), without init()'s page check;
  // false when its sequence has no rows there. kVariants: the sliding window cuts the keys; kTree
  // (GQA-packed tiles' variants): the tree mask's drafts need masking.
  template <bool kVariants = false, bool kTree = false>
  __device__ __forceinline__ bool init_tile(const PrefillParams& p, int block_m, int block_n, int x, int tiles_m,
                                            int hq_, int z) {
    // Causal: the last query blocks see the most keys; launching them first shortens the tail.
    const int m_block = p.causal ? tiles_m - 1 - x : x;
    hq = hq_;
    b = z / p.num_splits;
    split = z % p.num_splits;
    kv_head = hq / p.group;
    seq = resolve_sequence(p, b);
    row0 = m_block * block_m;
    if (row0 >= seq.q_len) return false;
    rows_here = min(block_m, seq.q_len - row0);
    keys = key_range<kVariants, kTree>(p, seq, split, row0, rows_here, block_n);
    n_blocks = keys.hi > keys.lo ? (keys.hi - keys.lo + block_n - 1) / block_n : 0;
    q_base = static_cast<const Element*>(p.q) + b * p.q_batch_stride + (seq.q_begin + row0) * p.q_token_stride +
             hq * p.q_head_stride;
    // A paged cache adds each key's page per row (paged_row); otherwise one base per sequence.
    const int64_t k_seq = p.kv.block_table != nullptr ? 0 : b * p.kv.k.block_stride + seq.k_begin * p.kv.k.token_stride;
    const int64_t v_seq = p.kv.block_table != nullptr ? 0 : b * p.kv.v.block_stride + seq.k_begin * p.kv.v.token_stride;
    k_base = static_cast<const Element*>(p.kv.k.data) + k_seq + kv_head * p.kv.k.head_stride;
    v_base = static_cast<const Element*>(p.kv.v.data) + v_seq + kv_head * p.kv.v.head_stride;
    return true;
  }

  // Row of key `token` of this block's sequence in a paged cache (pages checked by init).
  __device__ __forceinline__ const Element* paged_row(const PrefillParams& p, const Element* head_base,
                                                      int64_t page_stride, int64_t token_stride, int token) const {
    const int32_t page = p.kv.block_table[b * p.kv.block_table_stride + token / p.kv.page_size.divisor];
    return head_base + page * page_stride + (token % p.kv.page_size.divisor) * token_stride;
  }
};

// Which (query head, query) each row of a tile holds: query row0 + r of head hq0, or, with GQA
// packing (PrefillParams::pack_queries, prefill_sm90_gqa), query row0 + r % queries of head
// hq0 + r / queries, where rows from heads * queries on hold no query (padding of the tile).
template <bool kPacked>
struct TileRows {
  int hq0, row0;
  int queries = 0, heads = 1;  // packed tiles only

  __device__ __forceinline__ int head(int r) const {
    if constexpr (kPacked) return hq0 + r / queries;
    return hq0;
  }
  __device__ __forceinline__ int query(int r) const {
    if constexpr (kPacked) return row0 + r % queries;
    return row0 + r;
  }
  // Whether row r holds one of the q_len queries of its sequence.
  __device__ __forceinline__ bool holds(int r, int q_len) const {
    if constexpr (kPacked) return r < heads * queries && query(r) < q_len;
    return row0 + r < q_len;
  }
};

// The drafts the tree mask hides become -inf (mask_scores, with PrefillParams::tree_mask).
template <class Scores, class Coords, bool kPacked>
__device__ __forceinline__ void mask_hidden_drafts(Scores& scores, const Coords& coords, const PrefillParams& p,
                                                   const PrefillSequence& s, int b, const TileRows<kPacked>& rows,
                                                   int n0) {
  const DraftTree tree{p.tree_mask + b * p.tree_mask_batch_stride, p.tree_mask_query_stride, s.q_len,
                       s.k_len - s.q_len};
  CUTE_UNROLL
  for (int r = 0; r < cute::size<0>(scores); ++r) {
    const uint64_t hidden = tree_hidden_drafts(tree, rows.query(cute::get<0>(coords(r, 0))));
    CUTE_UNROLL
    for (int c = 0; c < cute::size<1>(scores); ++c) {
      if (draft_hidden(hidden, n0 + cute::get<1>(coords(r, c)) - tree.first_draft)) scores(r, c) = kNegInf;
    }
  }
}

// Sets scores(r, c) = -inf where key n0 + col is at or past `hi` or, causally, after the row's
// diagonal; kVariants: also outside the row's sliding window and (packed tiles) the drafts its
// tree-mask bits hide (a tree mask comes with causal off: its bits replace the causal rule).
// scores and coords are (rows, cols) views; coords give tile-local (row, col); b: s's index (read
// by the tree pass only).
template <bool kVariants = false, class Scores, class Coords, bool kPacked>
__device__ __forceinline__ void mask_scores(Scores& scores, const Coords& coords, const PrefillParams& p,
                                            const PrefillSequence& s, int b, const TileRows<kPacked>& rows, int n0,
                                            int hi) {
  CUTE_UNROLL
  for (int r = 0; r < cute::size<0>(scores); ++r) {
    const int i = rows.query(cute::get<0>(coords(r, 0)));
    int end = min(hi, visible_key_end(p.causal, s.q_len, s.k_len, i));
    int start = 0;
    if constexpr (kVariants) {
      const long long position = query_position(s, i);
      start = window_start_at(p, s, position);
      end = min(end, window_end_at(p, s, position));
    }
    CUTE_UNROLL
    for (int c = 0; c < cute::size<1>(scores); ++c) {
      const int key = n0 + cute::get<1>(coords(r, c));
      if (key >= end || (kVariants && key < start)) scores(r, c) = kNegInf;
    }
  }
  // The tree mask's pass, apart, and only in GQA-packed tiles (the families that serve decode
  // problems' speculative rows): its registers cost the other tiles' window rows 1-4%.
  if constexpr (kVariants && kPacked) {
    if (p.tree_mask != nullptr) mask_hidden_drafts(scores, coords, p, s, b, rows, n0);
  }
}
// Unpacked tiles (no tree pass: the sequence's index is not needed).
template <bool kVariants = false, class Scores, class Coords>
__device__ __forceinline__ void mask_scores(Scores& scores, const Coords& coords, const PrefillParams& p,
                                            const PrefillSequence& s, int row0, int n0, int hi) {
  mask_scores<kVariants>(scores, coords, p, s, /*b=*/0, TileRows<false>{0, row0}, n0, hi);
}

// Whether a block of keys from n0 needs mask_scores: it ends past keys.mask_from, or (kVariants)
// starts before the last row's window.
template <bool kVariants = false>
__device__ __forceinline__ bool needs_mask(const KeyRange& keys, int n0, int block_n) {
  return n0 + block_n > keys.mask_from || (kVariants && n0 < keys.mask_until);
}

// Copies rows [0, valid) of a (rows, cols) global tile into shared memory with cp.async, zero-
// filling the other rows (never reading them).
template <class TiledCopy, class ThrCopy, class GTensor, class STensor>
__device__ __forceinline__ void copy_rows_zfill(const TiledCopy& tiled_copy, const ThrCopy& thr_copy, const GTensor& g,
                                                const STensor& s, int valid) {
  using namespace cute;
  Tensor tg = thr_copy.partition_S(g);
  Tensor ts = thr_copy.partition_D(s);
  Tensor tc = thr_copy.partition_S(make_identity_tensor(shape(g)));
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tg); ++m) {
    copy(tiled_copy.with(get<0>(tc(0, m, 0)) < valid), tg(_, m, _), ts(_, m, _));
  }
}

// copy_rows_zfill for rows that are not evenly strided (a paged cache): row r < valid of the tile
// starts at row_start(r) (called for those rows only: past the sequence's end a page id may be
// out of the table); rows [valid, rows) are zero-filled from `never_read`, a real address.
template <class TiledCopy, class ThrCopy, class STensor, class RowStart>
__device__ __forceinline__ void gather_rows_zfill(const TiledCopy& tiled_copy, const ThrCopy& thr_copy,
                                                  const STensor& s, int valid, RowStart&& row_start,
                                                  const typename STensor::value_type* never_read) {
  using namespace cute;
  using Element = typename STensor::value_type;
  Tensor ts = thr_copy.partition_D(s);                                // (CPY, CPY_M, CPY_K)
  Tensor tc = thr_copy.partition_D(make_identity_tensor(product_each(shape(s))));  // -> (row, col)
  CUTE_UNROLL
  for (int m = 0; m < size<1>(ts); ++m) {
    const int row = get<0>(tc(0, m, 0));
    const bool in_range = row < valid;
    const Element* start = in_range ? row_start(row) : never_read;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(ts); ++k) {
      // One 16-byte chunk per (m, k): its columns are contiguous in the source row.
      Tensor src = make_tensor(make_gmem_ptr(start + get<1>(tc(0, m, k))), make_layout(shape(ts(_, m, k))));
      copy(tiled_copy.with(in_range), src, ts(_, m, k));
    }
  }
}

// acc += A * B with both operands streamed from shared memory one k-step ahead of the MMA.
template <class TiledMma, class Acc, class RegA, class RegB, class SmemA, class SmemB, class ViewA, class ViewB,
          class CopyA, class CopyB>
__device__ __forceinline__ void gemm_smem_smem(TiledMma& mma, Acc& acc, RegA& tCrA, RegB& tCrB, const SmemA& tCsA,
                                               const SmemB& tCsB, ViewA& tCrA_view, ViewB& tCrB_view,
                                               const CopyA& copy_a, const CopyB& copy_b) {
  using namespace cute;
  copy(copy_a, tCsA(_, _, 0), tCrA_view(_, _, 0));
  copy(copy_b, tCsB(_, _, 0), tCrB_view(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) {
      copy(copy_a, tCsA(_, _, k + 1), tCrA_view(_, _, k + 1));
      copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1));
    }
    gemm(mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// acc += A * B with A already in registers and B streamed from shared memory.
template <class TiledMma, class Acc, class RegA, class RegB, class SmemB, class ViewB, class CopyB>
__device__ __forceinline__ void gemm_reg_smem(TiledMma& mma, Acc& acc, const RegA& tCrA, RegB& tCrB,
                                              const SmemB& tCsB, ViewB& tCrB_view, const CopyB& copy_b) {
  using namespace cute;
  copy(copy_b, tCsB(_, _, 0), tCrB_view(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1));
    gemm(mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// The passes a prefill kernel body runs: one fused pass (online softmax), or the two-pass strategy's
// statistics pass (each row's max and sum of exponentials over all its keys, no V) followed by its
// output pass (scores recomputed, the final softmax applied directly: no O rescale).
enum class PrefillPass { kFused, kStats, kFromStats };

// Row i (of sequence b, query head hq) of the two-pass statistics in p.row_max / p.row_sum.
__device__ __forceinline__ int64_t two_pass_row(const PrefillParams& p, int b, int i, int hq) {
  return (int64_t(b) * p.max_q_len + i) * p.num_q_heads + hq;
}

// Statistics pass, after the softmax's sums are reduced: each row's max and sum, written by the
// quad leaders (the four threads of a row hold the same values); a bad sequence's max is NaN.
template <int kRows, class Coords>
__device__ __forceinline__ void store_two_pass_stats(const PrefillParams& p, const PrefillSequence& s, int b, int hq,
                                                     int row0, const Coords& coords, const OnlineSoftmax<kRows>& softmax,
                                                     bool quad_leader) {
  if (!quad_leader) return;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int i = row0 + cute::get<0>(coords(r, 0));
    if (i >= s.q_len) continue;
    const int64_t row = two_pass_row(p, b, i, hq);
    p.row_max[row] = s.bad ? __int_as_float(0x7fc00000) : softmax.row_max[r];
    p.row_sum[row] = softmax.row_sum[r];
  }
}

// Output pass: the final max and 1 / sum of the thread's rows, from the statistics pass.
template <int kRows>
struct TwoPassRowStats {
  float max[kRows], inv_sum[kRows];

  // Also hands the statistics to `softmax`, whose lse() then gives each row's LSE.
  template <class Coords>
  __device__ __forceinline__ void load(const PrefillParams& p, const PrefillSequence& s, int b, int hq, int row0,
                                       const Coords& coords, OnlineSoftmax<kRows>& softmax) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int i = min(row0 + cute::get<0>(coords(r, 0)), s.q_len - 1);
      const int64_t row = two_pass_row(p, b, i, hq);
      max[r] = p.row_max[row];
      const float sum = p.row_sum[row];
      inv_sum[r] = sum > 0.f ? 1.f / sum : 0.f;
      softmax.row_max[r] = max[r];
      softmax.row_sum[r] = sum;
    }
  }

  // scores (rows, keys), masked, become the final probabilities exp2((s - max) * scale_log2) / sum.
  // Returns their sum: a value that depends on every one of them (see keep_before_next_wait).
  template <class Scores>
  __device__ __forceinline__ float probabilities(Scores& scores, float scale_log2) const {
    float total = 0.f;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float base = max[r] == kNegInf ? 0.f : max[r] * scale_log2;
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(scores); ++c) {
        scores(r, c) = fast_exp2(scores(r, c) * scale_log2 - base) * inv_sum[r];
        total += scores(r, c);
      }
    }
    return total;
  }
};

// Sinks (the variants instance, PrefillParams::sinks): each final row's head's sink logit joins
// its softmax once (fold_sink): the row's LSE grows and its 1 / sum shrinks by the returned weight.
// Split partials keep their own sums: the combine kernel folds the sink after the merge.
// coords: tile-local (row, col) of each accumulator element; lse/inv: per accumulator row.
template <bool kVariants, class Coords, bool kPacked, int kRows>
__device__ __forceinline__ void fold_row_sinks(const PrefillParams& p, const PrefillSequence& s,
                                               const TileRows<kPacked>& rows, const Coords& coords,
                                               float (&lse)[kRows], float (&inv)[kRows]) {
  if constexpr (kVariants) {
    if (p.sinks == nullptr || p.output.mode != OutputMode::kFinal) return;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int local = cute::get<0>(coords(r, 0));
      if (!rows.holds(local, s.q_len)) continue;  // padding rows name no head
      inv[r] *= fold_sink(p.sinks[rows.head(local) * p.sinks_stride], &lse[r]);
    }
  }
}

// Rows a block writes, through the epilogue: O (normalized) and LSE, a split partial, or NaN when
// the sequence's device data was bad.
template <bool kPacked = false>
struct RowWriter {
  const PrefillParams& p;
  const PrefillSequence& s;
  int b, split;
  TileRows<kPacked> rows;

  // acc: (rows, cols) fp32 view; coords: tile-local (row, col) of each element; lse/inv: per row.
  template <class Element, int kHeadDim, class Acc, class Coords, int kRows>
  __device__ __forceinline__ void write(const Acc& acc, const Coords& coords, const float (&lse)[kRows],
                                        const float (&inv)[kRows], bool lse_writer) const {
    static_assert(decltype(cute::size<0>(acc))::value == kRows);
    if (p.output.mode == OutputMode::kPartial) {
      write_partials<kHeadDim>(acc, coords, lse, inv, lse_writer);
      return;
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int local = cute::get<0>(coords(r, 0));
      if (!rows.holds(local, s.q_len)) continue;
      const int i = rows.query(local);
      const OutputRow where{b, i, s.q_begin + i, rows.head(local), split};
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(acc); c += 2) {  // adjacent column pairs
        const float pair[2] = {acc(r, c) * inv[r], acc(r, c + 1) * inv[r]};
        write_output<Element, kHeadDim>(p.output, where, cute::get<1>(coords(r, c)), pair, lse[r], lse_writer && c == 0,
                                        s.bad);
      }
    }
  }

  // Split partials, the mode of split-KV prefill and of decode served by chunked prefill: a row's
  // address once, then its column pairs. Through write_output, which derives the address and tests
  // the mode again for every pair, a tile's partials took long with the DRAM idle: the tail of
  // every routed decode launch (docs/TUNING.md, "Kernels").
  template <int kHeadDim, class Acc, class Coords, int kRows>
  __device__ __forceinline__ void write_partials(const Acc& acc, const Coords& coords, const float (&lse)[kRows],
                                                 const float (&inv)[kRows], bool lse_writer) const {
    const OutputParams& o = p.output;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int local = cute::get<0>(coords(r, 0));
      if (!rows.holds(local, s.q_len)) continue;
      const int i = rows.query(local);
      const int64_t row = partial_row(o, OutputRow{b, i, s.q_begin + i, rows.head(local), split});
      float* dst = o.partial_o + row * kHeadDim;
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(acc); c += 2) {  // adjacent column pairs
        *reinterpret_cast<float2*>(dst + cute::get<1>(coords(r, c))) =
            s.bad ? make_float2(kOutputNaN, kOutputNaN) : make_float2(acc(r, c) * inv[r], acc(r, c + 1) * inv[r]);
      }
      if (lse_writer) o.partial_lse[row] = s.bad ? kOutputNaN : lse[r];
    }
  }
};

}  // namespace splitkv::detail
