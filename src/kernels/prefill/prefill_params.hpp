// Plain parameters of the prefill kernels (no CuTe types; filled on the host by the API).
#pragma once

#include <cstdint>

#include "kernels/common/kv_cache_view.hpp"
#include "kernels/common/output_params.hpp"

namespace splitkv::detail {

struct PrefillParams {
  // Token t of sequence b, head h: base + b * batch_stride + (cu_seqlens[b] + t) * token_stride
  // + h * head_stride. Padded batches have no cu_seqlens (offset 0); varlen ones batch_stride 0.
  const void* q;
  int64_t q_batch_stride, q_token_stride, q_head_stride;
  // K and V (16-bit; KvCacheView): token tensors (kv.seq_lens nullptr; varlen: block stride 0, the
  // tokens counted by cu_seqlens_k) or, for chunked prefill over a decode cache
  // (PrefillProblem::kv_cache), the cache: sequence b's keys are its first kv.seq_lens[b] tokens,
  // contiguous (block stride per sequence) or paged (kv.block_table, kv.page_size, kv.num_pages).
  KvCacheView kv;
  // O and LSE (kFinal: O like q, LSE padded [B, Hq, Lq] or varlen [Hq, total_q]) or this split's
  // partials (kPartial: rows (b * max_q_len + i) * Hq + hq).
  OutputParams output;

  const int32_t* cu_seqlens_q;  // [batch + 1] or nullptr (padded)
  const int32_t* cu_seqlens_k;
  // The mixed route's prefill part (docs/MIXED_BATCH.md): [batch], nonzero where another part
  // serves sequence b (a decode row): no tile of it runs and nothing of it is written here.
  // nullptr everywhere else.
  const int32_t* skip_sequences;
  int64_t total_q, total_k;     // varlen: tokens in the q and k tensors (bounds of cu_seqlens)

  int batch, num_q_heads, num_kv_heads, group;
  int max_q_len, max_kv_len;  // padded: the lengths; varlen: their bounds
  bool causal;
  float scale_log2;  // softmax_scale * log2(e)

  int num_splits;  // KV splits (blockIdx.z = b * num_splits + split)

  // Two-pass: per-row raw-score max and sum of exp2((s - max) * scale_log2), same row indexing.
  float* row_max;
  float* row_sum;

  // Persistent grids (prefill_sm90 tiles with two Q buffers): the blocks walk the plan's grid
  // (tiles_m, Hq, batch x splits) as a list of tiles, x fastest. Block i starts with tile i; its
  // next tiles come from tile_counter (zero before the launch: each claim returns grid size + the
  // claims before it, so blocks free first take the next tiles, as the hardware's block scheduler
  // hands out blocks) or, without a counter, with a stride of the grid size.
  int tiles_m;
  int32_t* tile_counter;
  // [1], read after the PDL wait: how many of the launched blocks walk the tiles (the mixed route
  // sets it on the device: fewer where decode blocks run beside); blocks from that index on exit at
  // once. nullptr: all of them.
  const int32_t* active_blocks = nullptr;

  // Stream-K tail (prefill_sm90, static persistent grids of uniform tiles, Plan::stream_k): tiles
  // [0, stream_first_tile) go by the grid stride as above; the key steps of the tiles after them
  // (stream_steps per tile) are cut into one equal range per block, so every block ends at the same
  // step instead of some running one more whole tile. A tile cut between blocks j and j + 1 is
  // finished in two parts whose (O, LSE) meet in slot j of the workspace: the part that arrives
  // first on the slot's counter (one per consumer warpgroup, zero before the launch) stores its
  // normalized O and LSE there, the other merges both in key order and writes the rows.
  // stream_steps 0: off.
  int stream_steps;
  int stream_first_tile;
  float* stream_o;    // [slots, consumer warpgroups, D / 8, 128 threads] float4s in accumulator order
  float* stream_lse;  // [slots, consumer warpgroups, rows per thread, 128 threads]
  int32_t* stream_counters;  // [slots, consumer warpgroups]

  // GQA packing (prefill_sm90_gqa, tiles::packed_queries_per_head): a tile holds the `group` query
  // heads of one KV head with pack_queries queries each, and the grid is (tiles_m, Hkv, batch x
  // splits). 0: a tile holds one query head's queries, the grid (tiles_m, Hq, batch x splits).
  int pack_queries;

  // Attention variants (docs/VARIANTS.md), read only by the kernels' variants instances
  // (prefill_variants): the logit softcap (0: off) and the sliding window of each query (keys
  // before / after its position; -1: unbounded), positions aligned bottom-right as the causal mask.
  float softcap = 0.f;
  int window_left = -1, window_right = -1;
  // A decode problem's tree mask (served by chunked prefill, Plan::decode_via_prefill; q_len <=
  // kMaxPrefillTreeDrafts): query i of sequence b sees draft j (its key k_len - q_len + j) when bit
  // j % 8 of byte tree_mask[b * batch stride + i * query stride + j / 8] is set; the bits replace
  // the causal rule among the drafts, so launches with a tree mask set causal off (every key before
  // the drafts is visible to every query either way). null: none.
  const uint8_t* tree_mask = nullptr;
  int64_t tree_mask_batch_stride = 0, tree_mask_query_stride = 0;
  // Per-head sink logits (fp32, head h at sinks[h * sinks_stride]) folded into the final rows a
  // kernel writes (fold_row_sinks); split partials leave them to the combine kernel. null: none.
  const float* sinks = nullptr;
  int64_t sinks_stride = 0;
};

// Whether a launch needs the variants instance of its kernel.
inline bool prefill_variants(const PrefillParams& p) {
  return p.softcap > 0.f || p.window_left >= 0 || p.window_right >= 0 || p.tree_mask != nullptr || p.sinks != nullptr;
}

}  // namespace splitkv::detail
