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
// Merge::kAuto's cluster rule: rows of at most this many keys (16-bit caches / quantized
// ones) take this many splits merged in a cluster when the grid is small (docs/TUNING.md).
constexpr int kAutoClusterMaxKeys16Bit = 4096;
constexpr int kAutoClusterMaxKeysQuantized = 2048;
constexpr int kAutoClusterSplits = 8;
// PlanTuning::l2_prefetch_keys == -1 (the planner's rule, decode on sm_90), on grids that two
// launches fit in the SMs' resident block slots together (so a launch's blocks are resident while
// the one ahead of it still runs): a split of at most kL2PrefetchWholeSplitMaxKeys keys is
// prefetched whole, a longer one its first kL2PrefetchLeadKeys keys (docs/TUNING.md, "L2 prefetch").
constexpr int kL2PrefetchWholeSplitMaxKeys = 256;
constexpr int kL2PrefetchLeadKeys = 32;
// An FP8 or INT8 cache (8-bit K and V codes, scales per head or per token) whose splits are merged
// by the combine kernel: splits of at most kL2PrefetchQuant8MaxSplitKeys keys prefetch their first
// kL2PrefetchQuant8LeadKeys (docs/TUNING.md, "L2 prefetch"); measured at D=128 only, so other
// head sizes keep the rule above.
constexpr int kL2PrefetchQuant8LeadKeys = 128;
constexpr int kL2PrefetchQuant8MaxSplitKeys = 512;
constexpr int kL2PrefetchQuant8HeadDim = 128;
// PlanTuning::prefill_route, by packed rows per KV head (q_len x group) and the grid (batch x Hkv
// KV heads, "tokens" = KV heads x max_kv_len): 25..64 rows (more than three quarters of the 32-row
// decode tile) on the 64-row tile from 4 KV heads and 64Ki tokens; 65..128 rows from 32Ki tokens,
// on the 128-row tile where the grid has at least 8 KV heads and 256Ki tokens, else on two 64-row
// tiles. The measurements: docs/TUNING.md, "Speculative rows through chunked prefill".
constexpr int kPrefillRouteMinRows = 25;
constexpr int kPrefillRouteNarrowMaxRows = 64;
constexpr int kPrefillRouteNarrowMinKvHeads = 4;
constexpr int64_t kPrefillRouteNarrowMinTokens = 65536;
constexpr int kPrefillRouteMaxRows = 128;
constexpr int64_t kPrefillRouteWideMinTokens = 32768;
constexpr int kPrefillRouteWideTileMinKvHeads = 8;
constexpr int64_t kPrefillRouteWideTileMinTokens = 262144;
constexpr const char* kPrefillRoute64RowFamily = "prefill_sm90_gqa64";
constexpr const char* kPrefillRoute128RowFamily = "prefill_sm90_gqa";

// work_units: thread blocks without splitting (decode: batch x KV heads x query tiles -- GQA is
// counted by KV heads, since the query heads of a group share one block). kv_blocks: KV blocks in
// the longest sequence (splits never exceed it). `why` receives a sentence for Plan::note.
// On the decode suite the choice is within 1% of the best split count (docs/TUNING.md).
// Wave efficiency of work_units x splits blocks on `slots` places (SMs, or resident block slots):
// the useful fraction of the ceil(blocks / slots) waves they run.
double wave_efficiency(int64_t work_units, int splits, int slots);

// `good_enough`: the smallest count whose wave efficiency is at least this fraction of the best.
constexpr double kWaveEfficiencyGoodEnough = 0.85;
// Filling the second resident block slot: among the counts of long enough splits, the first within
// 95% of the best fill (docs/TUNING.md, "Split counts").
constexpr double kSlotFillGoodEnough = 0.95;
int choose_num_splits(int64_t work_units, int kv_blocks, int sm_count, int cap, std::string* why,
                      double good_enough = kWaveEfficiencyGoodEnough);

// A grid of between 0.8 and 2 waves over `slots` (resident block slots) that choose_num_splits
// leaves whole: its last wave may run a fraction of the slots while the rest idle. The fewest
// splits, at most `cap`, whose grid fills the slots to kSlotFillGoodEnough; 1 where none does
// (a partial fill measured slower than the whole grid: the combine costs more than it fills).
// For blocks bound by the memory only (the caller decides). docs/TUNING.md, "Split counts".
int choose_tail_splits(int64_t work_units, int kv_blocks, int slots, int cap);

}  // namespace splitkv::plan
