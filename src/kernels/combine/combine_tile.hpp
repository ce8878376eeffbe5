// The combine's block shape (read by the combine kernel and the planner).
#pragma once

#include "kernels/common/merge_chunks.hpp"
#include "kernels/common/tile_summary.hpp"

namespace splitkv::tiles {

// ---- combine --------------------------------------------------------------------------------
// Blocks of 128 threads; head_dim / 4 threads merge one output row (a float4 of columns each), so
// a block merges 512 / head_dim rows. A row of more than one chunk of 8 splits (kMergeChunk,
// combine_state.cuh) gets a block of its own with `groups` such teams, one chunk each: groups is
// the chunk count rounded up to a power of two, at most 256 threads (8 teams at head_dim 128), so
// up to 64 splits cost one load latency, not eight, and the rows spread over as many SMs.
constexpr int kCombineThreads = 128;
constexpr int kCombineTeamsMaxThreads = 256;
constexpr int combine_rows_per_block(int head_dim) { return kCombineThreads / (head_dim / 4); }
constexpr int combine_max_split_groups(int head_dim) { return kCombineTeamsMaxThreads / (head_dim / 4); }
constexpr int combine_split_groups(int num_splits, int head_dim) {
  const int chunks = combine_chunks(num_splits);
  int groups = 1;
  while (groups < chunks && groups < combine_max_split_groups(head_dim)) groups *= 2;
  return groups;
}
constexpr TileSummary combine_summary(int, KvFormat) { return TileSummary{1, 0, kCombineThreads / 32, 0, 0}; }

}  // namespace splitkv::tiles
