// Plain parameters of the decode kernel (no CuTe types; filled on the host by the API).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "kernels/common/fast_divmod.hpp"
#include "kernels/common/kv_cache_view.hpp"
#include "kernels/common/output_params.hpp"

namespace splitkv::detail {

struct DecodeParams {
  // Q [batch, q_len, Hq, D] (strides in elements; last dim contiguous).
  const void* q;
  int64_t q_batch_stride, q_token_stride, q_head_stride;

  // The cache: codes, scales, pages, lengths ([batch]) and a *_kc cache's tail (KvCacheView).
  KvCacheView kv;
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

// Whether a variants instance runs its capped version (ScoreSoftcap<true>): a softcap is set.
SPLITKV_HD bool decode_softcap_on(const DecodeParams& p) { return p.softcap > 0.f; }

// The uncapped version of a variants instance serves p: the version whose twins (register-bound,
// short-block) a plan may launch in its place (LaunchConfig).
SPLITKV_HD bool decode_uncapped_variants(const DecodeParams& p) { return decode_variants(p) && !decode_softcap_on(p); }

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
