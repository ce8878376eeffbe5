// How many KV splits to use when the caller does not say.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tile_table.hpp"

namespace splitkv::plan {

constexpr int kMaxAutoSplits = 128;
// Largest thread-block cluster (non-portable size on sm_90) the decode kernel merges splits in: the
// ranks its cluster inbox is sized for (tiles::kMaxClusterRanks).
constexpr int kMaxClusterSplits = tiles::kMaxClusterRanks;
// PlanOptions::auto_cluster_combine: rows of at most this many keys (16-bit caches / quantized
// ones) take this many splits merged in a cluster when the grid is small (bench/NOTES.md, run 44:
// with the push merge, 16-bit B=1 4k 1.6-4% faster in a cluster, quantized 4k rows 1-6% slower).
constexpr int kAutoClusterMaxKeys16Bit = 4096;
constexpr int kAutoClusterMaxKeysQuantized = 2048;
constexpr int kAutoClusterSplits = 8;
// PlanOptions::prefill_route: causal decode with more packed rows per KV head than the 32-row decode
// tile and at most the 64-row prefill tile, on grids of at least this many KV heads holding at
// least this many cached tokens in all (bench/NOTES.md, run 51: below them, 8/1 B=1-8 and 28/4
// B=1 8k, the decode kernels tie or win).
constexpr int kPrefillRouteMinRows = 33;
constexpr int kPrefillRouteMaxRows = 64;
constexpr int kPrefillRouteMinKvHeads = 4;
constexpr int64_t kPrefillRouteMinTokens = 65536;
constexpr const char* kPrefillRouteFamily = "prefill_sm90_gqa64";

// work_units: thread blocks without splitting (decode: batch x KV heads x query tiles -- GQA is
// counted by KV heads, since the query heads of a group share one block). kv_blocks: KV blocks in
// the longest sequence (splits never exceed it). `why` receives a sentence for Plan::note.
// Measured (bench/NOTES.md): on the decode suite the choice is within 1% of the best split count.
int choose_num_splits(int64_t work_units, int kv_blocks, int sm_count, int cap, std::string* why);

}  // namespace splitkv::plan
