// Byte layout of the caller-provided workspace. Shared by the planner (sizes) and the launchers
// (offsets) so the two cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>

namespace splitkv::plan {

constexpr size_t kWorkspaceAlign = 256;

inline size_t align_up(size_t bytes) { return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// Split-KV partials: O_i as fp32 [num_splits, rows, head_dim] then LSE_i as fp32 [num_splits, rows].
// A "row" is one (sequence, query, query head). Nothing is needed without splitting. A decode plan
// that merges its splits in the split kernel (fused combine) adds one int32 arrival counter per
// tile of rows (sequence, KV head, query tile), zero between calls (prepare_workspace zeroes them
// once; the last block of each tile resets its own).
struct SplitWorkspace {
  size_t o_offset = 0;
  size_t lse_offset = 0;
  size_t counters_offset = 0;
  size_t counters_bytes = 0;
  size_t total_bytes = 0;
};

// A single split writes final rows: no workspace.
inline SplitWorkspace split_workspace(int num_splits, int64_t rows, int head_dim, int64_t tile_counters = 0) {
  SplitWorkspace w;
  if (num_splits <= 1) return w;
  w.o_offset = 0;
  w.lse_offset = align_up(size_t(num_splits) * size_t(rows) * size_t(head_dim) * sizeof(float));
  w.counters_offset = w.lse_offset + align_up(size_t(num_splits) * size_t(rows) * sizeof(float));
  w.counters_bytes = align_up(size_t(tile_counters) * sizeof(int32_t));
  w.total_bytes = w.counters_offset + w.counters_bytes;
  return w;
}

// The atomic combine's accumulators, after the split workspace (whose partials are its fallback):
// fp32 O [rows, head_dim] and weight sums [rows], zero between calls (prepare_workspace zeroes
// them once; the normalization kernel re-zeroes each row it writes).
struct AtomicCombineWorkspace {
  size_t o_offset = 0;
  size_t sum_offset = 0;
  size_t total_bytes = 0;  // from the start of the workspace
};

inline AtomicCombineWorkspace atomic_combine_workspace(int num_splits, int64_t rows, int head_dim) {
  AtomicCombineWorkspace w;
  w.o_offset = split_workspace(num_splits, rows, head_dim).total_bytes;
  w.sum_offset = w.o_offset + align_up(size_t(rows) * size_t(head_dim) * sizeof(float));
  w.total_bytes = w.sum_offset + align_up(size_t(rows) * sizeof(float));
  return w;
}

// Two-pass prefill: each row's score max and sum of exponentials, fp32 [rows] each.
struct TwoPassWorkspace {
  size_t max_offset = 0;
  size_t sum_offset = 0;
  size_t total_bytes = 0;
};

inline TwoPassWorkspace two_pass_workspace(int64_t rows) {
  TwoPassWorkspace w;
  w.sum_offset = align_up(size_t(rows) * sizeof(float));
  w.total_bytes = 2 * w.sum_offset;
  return w;
}

// A persistent prefill plan with dynamic tiles: one int32 tile counter in the last kWorkspaceAlign
// bytes of its workspace (after the staging copy, partials or statistics), zeroed by run_prefill.
constexpr size_t kTileCounterBytes = kWorkspaceAlign;
inline size_t tile_counter_offset(size_t workspace_bytes) { return workspace_bytes - kTileCounterBytes; }

// A prefill plan's stream-K tail (Plan::stream_k), after the rest of its workspace: per slot (a
// boundary between two blocks' step ranges: persistent blocks - 1) and consumer warpgroup of 64
// rows, one part's normalized O (fp32, 64 x head_dim) and LSE (two rows per thread, 128 threads),
// then one int32 counter per slot and warpgroup, zeroed by run_prefill before each launch.
struct StreamKWorkspace {
  size_t o_offset = 0;
  size_t lse_offset = 0;
  size_t counters_offset = 0;
  size_t counters_bytes = 0;
  size_t total_bytes = 0;  // from the start of the workspace
};

inline StreamKWorkspace stream_k_workspace(size_t start, int slots, int block_m, int head_dim) {
  StreamKWorkspace w;
  const size_t units = size_t(slots) * size_t(block_m / 64);
  w.o_offset = align_up(start);
  w.lse_offset = w.o_offset + align_up(units * 64 * size_t(head_dim) * sizeof(float));
  w.counters_offset = w.lse_offset + align_up(units * 2 * 128 * sizeof(float));
  w.counters_bytes = align_up(units * sizeof(int32_t));
  w.total_bytes = w.counters_offset + w.counters_bytes;
  return w;
}

// Chunked prefill over a quantized KV cache: the cache's first max_kv_len tokens per sequence
// dequantized into 16-bit K and V [batch, tokens, Hkv, D] (tokens = max(max_kv_len, 1)) and each
// sequence's length as the prefill reads it (int32 [batch]); the prefill's own workspace follows.
struct KvStaging {
  int64_t tokens = 0;
  size_t k_offset = 0;
  size_t v_offset = 0;
  size_t lens_offset = 0;
  size_t total_bytes = 0;
};

inline KvStaging kv_staging(int batch, int max_kv_len, int num_kv_heads, int head_dim) {
  KvStaging w;
  w.tokens = max_kv_len > 1 ? max_kv_len : 1;
  const size_t side = align_up(size_t(batch) * size_t(w.tokens) * size_t(num_kv_heads) * size_t(head_dim) * 2);
  w.v_offset = side;
  w.lens_offset = 2 * side;
  w.total_bytes = w.lens_offset + align_up(size_t(batch) * sizeof(int32_t));
  return w;
}

// The mixed route's scratch (PlanFields::mixed_scratch_offset): per decode part of width w
// queries (1 for single-query rows, Plan::mixed_decode_q for speculative rows; 0: absent) its
// padded queries and outputs [batch, w, Hq, D] (16-bit), LSEs fp32 [batch, Hq, w], lengths int32
// [batch] and block table int32 [batch, table_pages] (detail::block_table_pages); then the decode
// rows' slots and the prefill part's lengths and skip marks, int32 [batch] each; last the blocks
// the prefill part's persistent grid runs this step, one int32 (MixedRouteParams::prefill_blocks).
struct MixedScratchPart {
  int width = 0;
  size_t q_offset = 0, out_offset = 0, lse_offset = 0, lens_offset = 0, table_offset = 0;
};

struct MixedScratch {
  MixedScratchPart parts[2];
  size_t slots_offset = 0, prefill_lens_offset = 0, prefill_skip_offset = 0, prefill_blocks_offset = 0;
  size_t total_bytes = 0;
};

inline MixedScratch mixed_scratch(int batch, int decode_q, int num_q_heads, int head_dim, int table_pages) {
  MixedScratch w;
  w.parts[0].width = 1;
  w.parts[1].width = decode_q > 1 ? decode_q : 0;
  const size_t per_sequence = align_up(size_t(batch) * sizeof(int32_t));
  size_t at = 0;
  for (MixedScratchPart& part : w.parts) {
    if (part.width == 0) continue;
    const size_t rows = size_t(batch) * size_t(part.width) * size_t(num_q_heads);
    const size_t side = align_up(rows * size_t(head_dim) * 2);
    part.q_offset = at;
    part.out_offset = at + side;
    part.lse_offset = at + 2 * side;
    part.lens_offset = part.lse_offset + align_up(rows * sizeof(float));
    part.table_offset = part.lens_offset + per_sequence;
    at = part.table_offset + align_up(size_t(batch) * size_t(table_pages) * sizeof(int32_t));
  }
  w.slots_offset = at;
  w.prefill_lens_offset = at + per_sequence;
  w.prefill_skip_offset = w.prefill_lens_offset + per_sequence;
  w.prefill_blocks_offset = w.prefill_skip_offset + per_sequence;
  w.total_bytes = w.prefill_blocks_offset + align_up(sizeof(int32_t));
  return w;
}

}  // namespace splitkv::plan
