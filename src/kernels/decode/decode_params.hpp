// Plain parameters of the decode kernel (no CuTe types; filled on the host by the API).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "kernels/common/fast_divmod.hpp"
#include "kernels/common/key_tail_view.hpp"
#include "kernels/common/output_params.hpp"

namespace splitkv::detail {

struct DecodeParams {
  // Q [batch, q_len, Hq, D] (strides in elements; last dim contiguous).
  const void* q;
  int64_t q_batch_stride, q_token_stride, q_head_stride;

  // Key t of sequence b, KV head h lives at
  //   contiguous: k + b * k_page_stride + t * k_token_stride + h * k_head_stride
  //   paged:      k + block_table[b][t / page_size] * k_page_stride
  //                 + (t % page_size) * k_token_stride + h * k_head_stride
  // and likewise for V with its own strides. Strides count elements of a 16-bit cache and bytes
  // of a quantized one (codes: one byte each, or two per byte for INT4).
  const void* k;
  const void* v;
  int64_t k_page_stride, k_token_stride, k_head_stride;
  int64_t v_page_stride, v_token_stride, v_head_stride;
  // Scales of a quantized cache (docs/KV_FORMATS.md). FP8: fp32 per KV head, head h's at
  // scales + h * head_stride (fp32 elements; 0 broadcasts one scale). INT8/INT4: fp16 (scale, min)
  // pairs of key t of KV head h at scales + page * page_stride + h * head_stride + slot *
  // token_stride (fp16 elements; page and slot as for the codes).
  const void* k_scales;
  const void* v_scales;
  int64_t k_scale_page_stride, k_scale_head_stride, k_scale_token_stride;
  int64_t v_scale_page_stride, v_scale_head_stride, v_scale_token_stride;
  const int32_t* block_table;  // nullptr: contiguous KV
  int64_t block_table_batch_stride;
  FastDivmod page_size;  // tokens per page (paged KV)
  int num_pages;

  const int32_t* seq_lens;  // [batch]
  const int32_t* keys_after;  // [batch] or nullptr: keys of the context after this shard (causal)
  int64_t max_kv_len;       // the plan's bound on seq_lens (<= the cache's capacity); past it: NaN

  // O and LSE (kFinal: O [batch, q_len, Hq, D], LSE [batch, Hq, q_len]) or this split's partials
  // (kPartial: rows (b * q_len + i) * Hq + hq).
  OutputParams output;

  int batch, num_q_heads, num_kv_heads, q_len;
  // The divisors a block divides by (these three and page_size) are FastDivmods (one multiply and
  // a shift, not a runtime division); `.divisor` holds the value.
  FastDivmod group;    // Hq / Hkv: query heads packed into one KV head's tile
  int rows_per_kv;     // q_len * group; tile row r = i * group + h
  FastDivmod m_tiles;  // ceil(rows_per_kv / block_m)
  FastDivmod num_splits;
  int split_tokens;      // > 0: fixed split size (batch-invariant)
  bool cluster_combine;  // the splits of a row form one thread-block cluster and merge in it
  // Fused combine (not nullptr): one arrival counter per (sequence, KV head, query tile), zero
  // between launches; the tile's last split block to finish merges its rows from the partials
  // (output, kPartial) into `combined` (kFinal) and resets the counter.
  int32_t* tile_counters;
  OutputParams combined;
  bool causal;
  float scale_log2;  // softmax_scale * log2(e)
  // Before its programmatic-dependent-launch wait a block prefetches into L2 (decode/l2_prefetch.cuh)
  // its Q rows and its length's line (l2_prefetch), and the first l2_prefetch_keys keys of its split.
  bool l2_prefetch;
  int l2_prefetch_keys;

  // The keys of a *_kc cache (docs/KV_FORMATS.md, "Keys quantized per channel"): k holds complete
  // groups' codes, k_scales each group's fp16 (scale[D], min[D]) (k_scale_token_stride steps one
  // group), k_tail the newest keys. After the fields every instance reads: their offsets stay.
  KeyTailView k_tail;
  // The attention variants the decode kernels serve (docs/VARIANTS.md): the logit softcap (> 0; 0:
  // off; kernels/common/score_softcap.cuh) and the sliding window (-1: that side unbounded). With
  // any of them set the launchers pick the kernels' variants instances (decode_variants).
  float softcap = 0.f;
  int window_left = -1, window_right = -1;
  // Per-head sink logits (fp32, head h at sinks[h * sinks_stride]) a single split folds into its
  // final rows, or a cluster's merge into the rows it merges (finish_decode_block); null otherwise:
  // with partials for the combine kernel, or for a caller, the sink is folded once after the merge.
  const float* sinks = nullptr;
  int64_t sinks_stride = 0;
  // A tree mask over each sequence's last q_len keys, the drafts (docs/VARIANTS.md): query i of
  // sequence b sees draft j when bit j % 8 of byte tree_mask[b * batch stride + i * query stride +
  // j / 8] is set; null: none.
  const uint8_t* tree_mask = nullptr;
  int64_t tree_mask_batch_stride = 0, tree_mask_query_stride = 0;
};

SPLITKV_HD bool decode_variants(const DecodeParams& p) {
  return p.softcap > 0.f || p.window_left >= 0 || p.window_right >= 0 || p.sinks != nullptr || p.tree_mask != nullptr;
}

// A KV head's packed tile row -> its query (index in the sequence) and query head: row = i * group + h.
struct PackedRow {
  int query;
  int head;
};
SPLITKV_HD PackedRow packed_row(const DecodeParams& p, int kv_head, int row) {
  const int i = p.group.div(row);
  return {i, kv_head * p.group.divisor + (row - i * p.group.divisor)};
}

}  // namespace splitkv::detail
