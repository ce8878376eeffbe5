// Problem geometry: the numbers validation, the planner, the launchers and `describe` all need,
// computed in one place from the problem and the chosen family's tile.
#pragma once

#include <array>
#include <cstdint>

#include "common/softmax_scale.hpp"
#include "splitkv/problem.hpp"

namespace splitkv::plan {

// The softmax scale actually used (common/softmax_scale.hpp).
using detail::resolved_softmax_scale;

constexpr int kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z

// Decode: a block owns the q_len x group query rows that share one KV head (GQA packing), packed
// row r = i * group + h, in tiles of block_m rows.
struct DecodeGeometry {
  int group;           // Hq / Hkv
  int rows_per_kv;     // q_len * group
  int block_m;         // packed rows per tile
  int m_tiles;         // ceil(rows_per_kv / block_m)
  int64_t work_units;  // blocks before splitting: batch * Hkv * m_tiles
  int64_t out_rows;    // batch * q_len * Hq: rows of O, and of each split's partials
  float scale_log2;    // resolved softmax scale * log2(e)
  int num_kv_heads, batch;

  // Grid (KV split, KV head x query tile, sequence).
  std::array<int64_t, 3> grid(int num_splits) const { return {num_splits, int64_t(num_kv_heads) * m_tiles, batch}; }
};
DecodeGeometry decode_geometry(const DecodeProblem& problem, int block_m);

// Prefill: a block owns block_m query rows of one query head of one sequence, or, with GQA
// packing (packed_queries > 0), packed_queries queries of each of the group query heads that share
// one KV head.
struct PrefillGeometry {
  int group;           // Hq / Hkv
  int block_m;
  int packed_queries;  // 0: tiles of one query head
  int m_blocks;        // tiles per (sequence, grid head): ceil(max_q_len / (packed_queries or block_m))
  int grid_heads;      // Hq, or Hkv for packed tiles
  int64_t work_units;  // blocks before splitting: batch * grid_heads * m_blocks
  int64_t out_rows;    // batch * max_q_len * Hq: bound on the rows of O (varlen rows are fewer)
  float scale_log2;
  int num_q_heads, batch;

  // Grid (query block, query head or KV head, sequence x KV split).
  std::array<int64_t, 3> grid(int num_splits) const { return {m_blocks, grid_heads, int64_t(batch) * num_splits}; }
};
PrefillGeometry prefill_geometry(const PrefillProblem& problem, int block_m, int packed_queries = 0);

// A decode problem as chunked prefill over its cache: each sequence's q_len queries are the last
// q_len positions of its cached keys, so decode's causal rule (query i sees keys
// [0, seq_len - q_len + i]) is the chunk's bottom-right one (Plan::decode_via_prefill).
PrefillProblem as_chunked_prefill(const DecodeProblem& d);

// The other way (the mixed route's decode part): a chunked prefill over a cache as decode rows of
// q_len queries per sequence over the same cache, bounds and attention variants.
DecodeProblem as_decode_rows(const PrefillProblem& p, int q_len);

// The most keys a sequence's splits cut (split_span_from): max_kv_len, or with a left window the
// window of the first query plus the q_len - 1 after it and the block rounding (docs/VARIANTS.md).
int decode_split_keys(const DecodeProblem& problem, int block_keys);

}  // namespace splitkv::plan
