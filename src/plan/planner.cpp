// The planner: problem shape + device description -> Plan. Pure host code, no CUDA calls.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "validate/validate.hpp"
#include "common/block_table.hpp"
#include "common/formats.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/split_rule.hpp"
#include "plan/family_choice.hpp"
#include "plan/geometry.hpp"
#include "plan/plan_seal.hpp"
#include "plan/split_heuristic.hpp"
#include "plan/workspace_layout.hpp"
#include "registry/registry.hpp"
#include "splitkv/plan.hpp"

namespace splitkv {
namespace {

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// Shared memory the runtime reserves per resident block on sm_80+.
constexpr int kRuntimeSmemPerBlock = 1024;

int64_t grid_blocks(const detail::PlanFields& p) { return int64_t(p.grid[0]) * p.grid[1] * p.grid[2]; }
// Rounds of resident blocks the plan's grid takes at per_sm blocks per SM.
int grid_rounds(const detail::PlanFields& p, const DeviceInfo& device, int per_sm) {
  return ceil_div(grid_blocks(p), int64_t(device.sm_count) * per_sm);
}

int blocks_per_sm(const DeviceInfo& device, int smem_bytes, int threads) {
  const int by_smem = device.smem_per_sm_bytes / (smem_bytes + kRuntimeSmemPerBlock);
  const int by_threads = 2048 / threads;
  return std::max(1, std::min(by_smem, by_threads));
}

// Resolves options.num_splits / max_splits / split_tokens / auto into a split count.
struct SplitDecision {
  int num_splits = 1;
  int split_tokens = 0;
  std::string note;
};

// Splits for small grids of blocks that dequantize a quantized cache (fewer blocks than SMs at the
// wave rule's count). They are bound by their own instructions, so an SM holding one block more
// than another sets the time: the grid fills one or two blocks per SM evenly (as many splits as
// keep work units x splits <= per_sm x SMs, splits of at least kMinKeysEvenFillSplit keys), not
// the ~85% of the SMs the wave rule settles for. With 8-bit values the two-block fills leave
// kSmsForTheCombine SMs to the previous call's combine blocks; 4-bit values fill every slot.
// Evidence: docs/TUNING.md, "Split counts".
constexpr int kMinKeysEvenFillSplit = 512;
constexpr int kSmsForTheCombine = 2;
int even_fill_splits(int64_t work_units, int kv_blocks, int max_kv_len, int sm_count, int blocks_per_sm,
                     int value_bits, int cap, int* chosen_per_sm) {
  int best = 1;
  *chosen_per_sm = 1;
  for (int per_sm = 1; per_sm <= std::min(blocks_per_sm, 2); ++per_sm) {
    const int sms = value_bits == 8 && per_sm == 2 ? sm_count - kSmsForTheCombine : sm_count;
    const int64_t fit = int64_t(per_sm) * sms / work_units;
    const int splits = int(std::min<int64_t>({fit, kv_blocks, cap, max_kv_len / kMinKeysEvenFillSplit}));
    if (splits > best) {
      best = splits;
      *chosen_per_sm = per_sm;
    }
  }
  return best;
}

// slots_per_sm: resident blocks per SM the auto rule may fill (1: one wave of blocks per SM);
// quantized_value_bits: 4 or 8 where the blocks dequantize a quantized cache whose values have
// that many bits (even_fill_splits for small grids), 0 for a 16-bit cache; split_tail: whether the
// blocks are bound by the memory, so that a grid's last part-wave pays for splitting
// (choose_tail_splits).
constexpr int kMinKeysPerExtraSplit = 2048;
Status decide_splits(const PlanOptions& o, int64_t work_units, int max_kv_len, int block_keys,
                     const DeviceInfo& device, int slots_per_sm, int quantized_value_bits, bool split_tail,
                     SplitDecision* out) {
  const int kv_blocks = std::max(1, ceil_div(max_kv_len, block_keys));
  if (o.num_splits < 0) return Status::invalid("options.num_splits", ">= 0 (0 = auto)", std::to_string(o.num_splits));
  if (o.max_splits < 0) return Status::invalid("options.max_splits", ">= 0 (0 = no cap)", std::to_string(o.max_splits));
  if (o.split_tokens < 0) return Status::invalid("options.split_tokens", ">= 0 (0 = off)", std::to_string(o.split_tokens));

  if (o.split_tokens > 0) {
    if (o.split_tokens % block_keys != 0) {
      return Status::invalid("options.split_tokens", "a multiple of " + std::to_string(block_keys) +
                                                         " (the kernel's KV block)",
                             std::to_string(o.split_tokens));
    }
    if (o.num_splits > 0) {
      return Status::invalid("options.num_splits", "0 when split_tokens fixes the split size",
                             std::to_string(o.num_splits));
    }
    out->split_tokens = o.split_tokens;
    out->num_splits = std::max(1, ceil_div(max_kv_len, o.split_tokens));
    if (o.max_splits > 0 && out->num_splits > o.max_splits) {
      return Status::invalid("options.max_splits",
                             ">= " + std::to_string(out->num_splits) + " (max_kv_len " +
                                 std::to_string(max_kv_len) + " in splits of " +
                                 std::to_string(o.split_tokens) + " tokens)",
                             std::to_string(o.max_splits));
    }
    out->note = "batch-invariant: fixed splits of " + std::to_string(o.split_tokens) + " tokens";
    return Status::success();
  }
  if (o.num_splits > 0) {
    if (o.max_splits > 0 && o.num_splits > o.max_splits) {
      return Status::invalid("options.num_splits", "<= options.max_splits (" + std::to_string(o.max_splits) + ")",
                             std::to_string(o.num_splits));
    }
    out->num_splits = std::min(o.num_splits, kv_blocks);
    out->note = "forced " + std::to_string(o.num_splits) + " splits";
    if (out->num_splits != o.num_splits) {
      out->note += ", clamped to " + std::to_string(kv_blocks) + " (KV blocks of " +
                   std::to_string(block_keys) + " keys)";
    }
    return Status::success();
  }
  const int cap = o.max_splits > 0 ? o.max_splits : plan::kMaxAutoSplits;
  out->num_splits = plan::choose_num_splits(work_units, kv_blocks, device.sm_count, cap, &out->note);
  if (quantized_value_bits > 0 && work_units * out->num_splits < device.sm_count) {
    int per_sm = 1;
    const int even = even_fill_splits(work_units, kv_blocks, max_kv_len, device.sm_count, slots_per_sm,
                                      quantized_value_bits, cap, &per_sm);
    if (even > out->num_splits) {
      out->num_splits = even;
      out->note = "even fill of resident blocks (quantized cache; " + std::to_string(per_sm) +
                  " block(s) per SM): " + std::to_string(work_units) + " work units x " + std::to_string(even) +
                  " splits on " + std::to_string(device.sm_count) + " SMs";
    }
  } else if (slots_per_sm > 1) {
    // Filling every resident block slot pays only while splits keep at least kMinKeysPerExtraSplit
    // keys each (a block's fixed cost). The wave rule over the slots, cut to splits that long; or,
    // where it fills the slots better, the long-enough count that fills them best (the first within
    // kSlotFillGoodEnough of the best). Evidence: docs/TUNING.md, "Split counts".
    std::string unused;
    const int slots = device.sm_count * slots_per_sm;
    const int long_enough = std::max(1, ceil_div(max_kv_len, kMinKeysPerExtraSplit));
    const int cut = std::min(plan::choose_num_splits(work_units, kv_blocks, slots, cap, &unused), long_enough);
    const int best_fill = plan::choose_num_splits(work_units, kv_blocks, slots, std::min(cap, long_enough), &unused,
                                                  plan::kSlotFillGoodEnough);
    const bool fills_more =
        plan::wave_efficiency(work_units, best_fill, slots) > plan::wave_efficiency(work_units, cut, slots);
    const int more = fills_more ? best_fill : cut;
    // A grid of one wave and a part over the slots: its last wave alone would leave slots idle.
    const int tail =
        split_tail ? plan::choose_tail_splits(work_units, kv_blocks, slots, std::min(cap, long_enough)) : 1;
    if (std::max(more, tail) > out->num_splits) {
      out->num_splits = std::max(more, tail);
      out->note = "wave efficiency over " + std::to_string(slots) + " block slots (" + std::to_string(slots_per_sm) +
                  " resident blocks per SM): " + std::to_string(work_units) + " work units x " +
                  std::to_string(out->num_splits) + " splits of >= " + std::to_string(kMinKeysPerExtraSplit) + " keys";
    }
  }
  return Status::success();
}

// Chooses the family and fills the plan's tile fields from its summary.
Status choose_family_and_tile(registry::Kind kind, Strategy strategy, int head_dim, DType dtype, KvFormat kv_format,
                              const DeviceInfo& device, const PlanOptions& options, detail::PlanFields* p,
                              tiles::TileSummary* tile, bool kv_cache = false, bool paged_cache = false,
                              int rows_per_kv = 1) {
  plan::FamilyRequest request{kind,           strategy,    head_dim,    dtype, detail::resolve_kv_format(kv_format, dtype),
                              device,         options.family, kv_cache, paged_cache, rows_per_kv};
  int family = -1;
  if (Status s = plan::choose_family(request, &family); !s) return s;
  const registry::Family& f = registry::families()[family];
  *tile = f.tile(head_dim, request.kv_format);
  p->family = f.name;
  p->block_m = tile->block_m;
  p->block_n = tile->block_n;
  p->warps = tile->warps;
  p->stages = tile->stages;
  p->smem_bytes = tile->smem_bytes;
  if (p->smem_bytes > device.smem_per_block_bytes) {
    return Status::unsupported("head_dim", std::string("kernel family ") + f.name + " needs " +
                                               std::to_string(p->smem_bytes) +
                                               " bytes of shared memory per block; the device allows " +
                                               std::to_string(device.smem_per_block_bytes));
  }
  p->blocks_per_sm = blocks_per_sm(device, p->smem_bytes, tile->threads());
  return Status::success();
}

// PlanTuning::even_placement: the shared memory per block that lets an SM hold the even share of
// a one-wave grid, ceil(blocks / SMs), but not one block more; 0 where the kernel's own size
// already does, the grid needs more than one wave, or the splits merge in clusters.
int even_placement_smem_bytes(const PlanOptions& options, const DeviceInfo& device, const detail::PlanFields& p) {
  if (!options.tuning.even_placement || p.cluster_combine) return 0;
  const int64_t blocks = grid_blocks(p);
  if (blocks > int64_t(device.sm_count) * p.blocks_per_sm) return 0;
  const int share = ceil_div(blocks, device.sm_count);
  if (share >= p.blocks_per_sm) return 0;
  const int bytes = device.smem_per_sm_bytes / (share + 1) - kRuntimeSmemPerBlock + 1;
  return bytes > p.smem_bytes && bytes <= device.smem_per_block_bytes ? bytes : 0;
}

// Block slots per SM the decode split rule may fill: one for a 16-bit cache's single-query blocks
// (they stream at the memory's pace), every resident block's for blocks that spend more
// instructions per byte (a quantized cache, several queries per sequence). docs/TUNING.md, "Split
// counts".
bool reads_quantized_cache(const DecodeProblem& problem) {
  return detail::kv_format_traits(detail::resolve_kv_format(problem.kv_format, problem.dtype)).quantized;
}

// Bits per stored K and V value of a quantized cache (4: INT4, K8V4's V; 8: FP8, INT8, K8V4's K),
// 0 for a 16-bit cache.
tiles::KvCodeBits quantized_code_bits(const DecodeProblem& problem) {
  if (!reads_quantized_cache(problem)) return tiles::KvCodeBits{0, 0, false};
  return tiles::kv_code_bits(detail::resolve_kv_format(problem.kv_format, problem.dtype));
}

int decode_slots_per_sm(const DecodeProblem& problem, int blocks_per_sm) {
  return reads_quantized_cache(problem) || problem.q_len > 1 ? blocks_per_sm : 1;
}

// Replaces the plan's family and tile with `family` where that family can serve the problem (its
// tile and the page size may disagree, say); returns whether it did. The planner's own tile
// choices are optimisations, not requests: one that cannot serve leaves the first choice in place.
bool switch_prefill_family(const char* family, const PrefillProblem& problem, Strategy served, bool paged_read,
                           const DeviceInfo& device, const PlanOptions& options, detail::PlanFields* p, tiles::TileSummary* tile) {
  PlanOptions named = options;
  named.family = family;
  detail::PlanFields switched = *p;
  tiles::TileSummary switched_tile = *tile;
  if (!choose_family_and_tile(registry::Kind::kPrefill, served, problem.head_dim, problem.dtype, KvFormat::kNative,
                              device, named, &switched, &switched_tile, problem.kv_cache, paged_read)) {
    return false;
  }
  *p = switched;
  *tile = switched_tile;
  return true;
}

// Two tile variants of prefill_sm90 replace its default tile where they measured faster
// (docs/TUNING.md, "Prefill tiles").
// - D=64: the three-consumer tile (prefill_sm90_m192, 192 query rows) reuses each K/V tile for 1.5x
//   the rows; slower on small grids, so it is taken from 2.5 waves on (x2: 5 half-waves).
// - D=256: the 80-key tile (prefill_sm90_n80, FlashAttention-3's D=256 shape): same grid, four
//   stages of 40 KB instead of 32 KB ones. Taken at every D=256 shape.
constexpr char kPrefill192Rows[] = "prefill_sm90_m192";
constexpr char kPrefill80Keys[] = "prefill_sm90_n80";
constexpr int kMinHalfWavesFor192Rows = 5;
// On a switch, *why says so for the plan's note.
// paged_read: whether the family reads K/V from pages (the first choice's request, kept).
void prefer_sm90_tile_variant(const PrefillProblem& problem, Strategy served, bool paged_read,
                              const DeviceInfo& device, const PlanOptions& options, detail::PlanFields* p, tiles::TileSummary* tile,
                              std::string* why) {
  if (!options.family.empty() || p->family != "prefill_sm90") return;
  if (problem.head_dim != 64 && problem.head_dim != 256) return;
  const bool rows192 = problem.head_dim == 64;
  const char* variant = rows192 ? kPrefill192Rows : kPrefill80Keys;
  const int index = registry::find_family(variant);
  if (index < 0 || registry::find_instance(index, problem.dtype, problem.head_dim, KvFormat::kNative) < 0) {
    return;  // not in this build
  }
  std::string reason = "measured faster at head dim 256";
  if (rows192) {
    const KvFormat sixteen_bit = detail::resolve_kv_format(KvFormat::kNative, problem.dtype);
    const int block_m = registry::families()[index].tile(problem.head_dim, sixteen_bit).block_m;
    const int64_t blocks = plan::prefill_geometry(problem, block_m).work_units;
    if (2 * blocks < int64_t(kMinHalfWavesFor192Rows) * device.sm_count) return;
    reason = std::to_string(blocks) + " blocks of 192 query rows make >= 2.5 waves on " +
             std::to_string(device.sm_count) + " SMs";
  }
  if (!switch_prefill_family(variant, problem, served, paged_read, device, options, p, tile)) return;
  *why = std::string(variant) + ": " + reason;
}

// GQA packing (prefill_sm90_gqa): a tile holds the query heads of one KV head, m queries each (m =
// block_m / group in whole 8-row atoms), instead of block_m queries of one head. Where a sequence
// has fewer queries than a tile's rows (chunked prefill of short chunks, speculative queries), a
// tile of one head is mostly padding that still runs every product and re-reads the KV head's keys
// from L2 once per query head; a packed tile fills its rows and reads them once. The planner
// packs where that makes fewer tiles (Hkv x ceil(Lq / m) < Hq x ceil(Lq / block_m)), starting from
// the tile it would run otherwise (any prefill_sm90 one-pass tile); naming the family packs always,
// and a group it cannot pack is an error. On a switch, *why says so for the plan's note.
constexpr char kPrefillPackedGqa[] = "prefill_sm90_gqa";
constexpr char kPrefillPackedGqa64[] = "prefill_sm90_gqa64";  // by name (prefill), or by the decode route
Status plan_gqa_packing(const PrefillProblem& problem, Strategy served, bool paged_read, const DeviceInfo& device,
                        const PlanOptions& options, detail::PlanFields* p, tiles::TileSummary* tile, std::string* why) {
  const int group = problem.num_q_heads / problem.num_kv_heads;
  if (options.family == kPrefillPackedGqa || options.family == kPrefillPackedGqa64) {
    p->packed_queries = tiles::packed_queries_per_head(tile->block_m, group);
    if (p->packed_queries == 0) {
      return Status::unsupported("options.family", options.family + " packs at most " +
                                                       std::to_string(tile->block_m / 8) +
                                                       " query heads per KV head (whole 8-row atoms of a " +
                                                       std::to_string(tile->block_m) + "-row tile); this problem has " +
                                                       std::to_string(group));
    }
    return Status::success();
  }
  const bool sm90_one_pass = p->family == "prefill_sm90" || p->family == kPrefill192Rows || p->family == kPrefill80Keys;
  if (!options.family.empty() || !sm90_one_pass || group < 2) return Status::success();
  const int index = registry::find_family(kPrefillPackedGqa);
  if (index < 0 || registry::find_instance(index, problem.dtype, problem.head_dim, KvFormat::kNative) < 0) {
    return Status::success();  // not in this build
  }
  const KvFormat sixteen_bit = detail::resolve_kv_format(KvFormat::kNative, problem.dtype);
  const int packed_block_m = registry::families()[index].tile(problem.head_dim, sixteen_bit).block_m;
  const int packed = tiles::packed_queries_per_head(packed_block_m, group);
  if (packed == 0) return Status::success();
  const int64_t packed_tiles = plan::prefill_geometry(problem, packed_block_m, packed).work_units;
  const int64_t head_tiles = plan::prefill_geometry(problem, tile->block_m).work_units;
  if (packed_tiles >= head_tiles) return Status::success();
  if (!switch_prefill_family(kPrefillPackedGqa, problem, served, paged_read, device, options, p, tile)) {
    return Status::success();
  }
  p->packed_queries = packed;
  *why = std::string(kPrefillPackedGqa) + ": " + std::to_string(group) + " query heads x " + std::to_string(packed) +
         " queries per tile, " + std::to_string(packed_tiles) + " tiles instead of " + std::to_string(head_tiles);
  return Status::success();
}

bool known_merge(Merge m) { return int(m) >= int(Merge::kAuto) && int(m) <= int(Merge::kAtomic); }

// Decode options that cannot take effect are refused by name rather than dropped: a merge that is
// not one, and an L2 key prefetch that is out of range or that the device cannot run.
Status check_decode_options(const DecodeProblem& problem, const DeviceInfo& device, const PlanOptions& o) {
  if (!known_merge(o.merge)) return Status::invalid("options.merge", "a Merge value", std::to_string(int(o.merge)));
  const PlanTuning& t = o.tuning;
  if (t.l2_prefetch_keys < -1 || t.l2_prefetch_keys > std::max(problem.max_kv_len, 0)) {
    return Status::invalid("options.tuning.l2_prefetch_keys",
                           "-1 (the planner's rule), 0 (off) or 1..max_kv_len (" + std::to_string(problem.max_kv_len) +
                               ") keys",
                           std::to_string(t.l2_prefetch_keys));
  }
  if (t.l2_prefetch_keys > 0 && !t.l2_prefetch) {
    return Status::invalid("options.tuning.l2_prefetch_keys", "-1 or 0 when options.tuning.l2_prefetch is off",
                           std::to_string(t.l2_prefetch_keys));
  }
  if (t.l2_prefetch_keys > 0 && device.cc_major < 9) {
    return Status::unsupported("options.tuning.l2_prefetch_keys", "> 0 needs an sm_90 device (prefetch before the "
                                                                  "programmatic-dependent-launch wait); use -1 or 0");
  }
  return Status::success();
}

// The atomic merge needs a fixed reference and no promise of fixed bits.
Status check_atomic_combine(const PlanOptions& o) {
  if (o.split_tokens > 0) {
    return Status::invalid("options.merge", "not kAtomic with split_tokens (batch-invariant mode needs a fixed merge order)",
                           "kAtomic");
  }
  if (!std::isfinite(o.atomic_reference_lse)) {
    return Status::invalid("options.atomic_reference_lse", "a finite value", std::to_string(o.atomic_reference_lse));
  }
  return Status::success();
}

// What both Merge::kAuto cluster rules below need: the merge left to the planner, the planner's own split count, no
// other merge asked for, clusters (sm_90) and tiles of at most 16 rows (32-row tiles not measured).
bool auto_cluster_may_merge(const PlanOptions& options, const DeviceInfo& device, int block_m, bool auto_splits) {
  return options.merge == Merge::kAuto && auto_splits && device.cc_major >= 9 && block_m <= 16;
}

// Merge::kAuto: short rows on a grid that 8 splits of every work unit leave
// at half the SMs or fewer, where the combine kernel's launch is a large share of the call. Every
// KV format; not the 32-row tile. A row is short by the keys its splits span: its length, or a
// window's band (which starts mid-block, hence one KV block of slack). docs/TUNING.md, "Cluster merges".
bool short_rows_merge_in_cluster(const DecodeProblem& problem, const PlanOptions& options, const DeviceInfo& device,
                                 int block_m, int block_n, int64_t work_units, bool auto_splits, int planned_splits) {
  const int max_keys = reads_quantized_cache(problem) ? plan::kAutoClusterMaxKeysQuantized : plan::kAutoClusterMaxKeys16Bit;
  return auto_cluster_may_merge(options, device, block_m, auto_splits) &&
         plan::decode_split_keys(problem, block_n) <= max_keys + block_n &&
         planned_splits >= plan::kAutoClusterSplits && 2 * work_units * plan::kAutoClusterSplits <= device.sm_count;
}

// Merge::kAuto, second case: single-query rows over a 16-bit cache whose wave
// rule planned exactly 2 splits merge them in clusters of 2 (no combine launch; a 2-block cluster
// is co-scheduled as easily as one block); 4-split rows measured slower in clusters, hence exactly
// 2. docs/TUNING.md, "Cluster merges".
bool two_splits_merge_in_cluster(const DecodeProblem& problem, const PlanOptions& options, const DeviceInfo& device,
                                 int block_m, bool auto_splits, int planned_splits) {
  return auto_cluster_may_merge(options, device, block_m, auto_splits) && problem.q_len == 1 &&
         !reads_quantized_cache(problem) && planned_splits == 2;
}

// PlanTuning::l2_prefetch_keys: the caller's count, or the rule (split_heuristic.hpp). Blocks
// launched early by programmatic dependent launch (sm_90) prefetch while they would otherwise only
// wait; on a grid that leaves no room for the next launch's blocks, they would launch late and the
// prefetch (a length read first) would sit on their critical path instead. Where no combine kernel
// runs between two launches (one split, or splits merged in a cluster), the next one's blocks are
// resident from this one's start: what they prefetch survives only if this launch's reads fit in
// L2. docs/TUNING.md, "L2 prefetch".
int l2_prefetch_keys(const DecodeProblem& problem, const PlanOptions& options, const DeviceInfo& device,
                     const detail::PlanFields& p) {
  if (!options.tuning.l2_prefetch || device.cc_major < 9) return 0;
  if (options.tuning.l2_prefetch_keys >= 0) return options.tuning.l2_prefetch_keys;
  if (2 * grid_blocks(p) > int64_t(device.sm_count) * p.blocks_per_sm) return 0;
  const detail::KvFormatTraits format = detail::kv_format_traits(detail::resolve_kv_format(problem.kv_format, problem.dtype));
  const int64_t key_bits = detail::element_traits(format.k_element).bits + detail::element_traits(format.v_element).bits;
  const int split_keys = plan::decode_split_keys(problem, p.block_n);  // the keys a row's splits span
  const int64_t cache_bytes =
      int64_t(problem.batch) * split_keys * problem.num_kv_heads * problem.head_dim * key_bits / 8;
  if ((p.cluster_combine || p.num_splits == 1) && cache_bytes > device.l2_bytes) return 0;
  const int chunk = detail::split_chunk_keys(split_keys, p.num_splits, p.split_tokens, p.block_n);
  // 8-bit codes for K and V with per-token or per-head scales, splits merged by the combine kernel:
  // a longer lead over splits of up to kL2PrefetchQuant8MaxSplitKeys (at the head size measured).
  const bool quant8 = format.quantized && !format.channel_keys && key_bits == 16 &&
                      problem.head_dim == plan::kL2PrefetchQuant8HeadDim;
  if (quant8 && !p.cluster_combine && p.num_splits > 1 && chunk <= plan::kL2PrefetchQuant8MaxSplitKeys) {
    return std::min(chunk, plan::kL2PrefetchQuant8LeadKeys);
  }
  return chunk <= plan::kL2PrefetchWholeSplitMaxKeys ? chunk : plan::kL2PrefetchLeadKeys;
}

// The argument names say which problem sizes make grid y and z.
Status set_grid(const std::array<int64_t, 3>& grid, const char* y_argument, const char* z_argument, detail::PlanFields* p) {
  for (int i = 1; i < 3; ++i) {
    if (grid[i] > plan::kMaxGridYZ) {
      return Status::invalid(i == 1 ? y_argument : z_argument,
                             "a problem whose grid fits CUDA's limit of " + std::to_string(plan::kMaxGridYZ) +
                                 " blocks in y and z",
                             "grid dimension " + std::string(i == 1 ? "y" : "z") + " of " + std::to_string(grid[i]));
    }
  }
  for (int i = 0; i < 3; ++i) p->grid[i] = static_cast<int>(grid[i]);
  return Status::success();
}

// A static persistent grid's stream-K tail (PlanTuning::stream_k_prefill). Whole tiles in a stride
// leave the blocks without a tile in the last round idle; the tail shares the last tiles' key steps
// out evenly instead: every round but the last whole one goes by the stride, and the steps of the
// tiles left (at least one per block, so a tile is cut at most once) make one range per block.
// Only for uniform tiles (same keys per tile: non-causal, padded token tensors, no split) of the
// one-pass kernel without GQA packing, and only where the last round leaves more than a fifth of
// the blocks idle and the tiles have at least kStreamKMinSteps key steps (each block pays one
// extra tile start and a merge). docs/TUNING.md, "Prefill".
constexpr int64_t kStreamKMinSteps = 16;

// The softcap or a sliding window (a DecodeProblem or PrefillProblem): in prefill what the one-pass
// kernels' variants instances serve (docs/VARIANTS.md), and the argument that names it in a refusal.
template <class Problem>
bool softcap_or_window(const Problem& problem) {
  return problem.softcap > 0.f || problem.window_left >= 0 || problem.window_right >= 0;
}
// What the one-pass prefill kernels' variants instances serve: the softcap, a window, sinks.
bool one_pass_variants(const PrefillProblem& problem) { return softcap_or_window(problem) || problem.sinks; }
const char* one_pass_variants_argument(const PrefillProblem& problem) {
  if (problem.softcap > 0.f) return "softcap";
  if (problem.window_left >= 0) return "window_left";
  return problem.window_right >= 0 ? "window_right" : "sinks";
}

// The blocks an SM holds of the instance a decode plan launches, where its registers hold fewer
// than its shared memory allows (tiles::TileSummary::register_blocks): the plain instance, or the
// variants instance without or with the softcap. The uncapped variants instance of such a tile may
// have a register-bound twin, which spills a few values and pays where it saves a round of
// resident blocks and the blocks are bound by their latency, not the memory: blocks of at most
// kShortBlockKeys keys (a short sliding window), or a grid the twin runs in one round (a tail wave
// removed). Over long rows in several rounds the memory sets the pace either way and the spills
// cost. The plan launches the twin there and otherwise counts the blocks the registers hold. Counted
// after the splits, which the shared memory's count still decides (docs/TUNING.md, "Kernels").
constexpr int kShortBlockKeys = 256;
// The instance a decode plan launches, as far as its registers go: the blocks per SM they hold (0:
// no fewer than shared memory allows), and whether it has a register-bound twin that holds more.
struct LaunchedRegisters {
  int held = 0;
  bool variants = false;
  bool twin = false;
};
LaunchedRegisters launched_registers(const DecodeProblem& problem, const tiles::TileSummary& tile) {
  const bool variants = softcap_or_window(problem) || problem.sinks || problem.tree_mask;
  const bool capped = problem.softcap > 0.f;
  const tiles::TileSummary::RegisterBlocks& registers =
      problem.dtype == DType::kF16 ? tile.fp16_register_blocks : tile.register_blocks;
  LaunchedRegisters r;
  r.held = !variants ? registers.plain : capped ? registers.capped : registers.variants;
  r.variants = variants;
  r.twin = variants && !capped && r.held > 0 && tile.bound_variants_blocks > r.held;
  return r;
}
// The blocks per SM the split rules fill: what the launched instance's registers hold where fewer
// than shared memory allows, unless a register-bound twin may be launched for shared memory's count.
int split_blocks_per_sm(const DecodeProblem& problem, const tiles::TileSummary& tile, int blocks_per_sm) {
  const LaunchedRegisters r = launched_registers(problem, tile);
  return r.held == 0 || r.held >= blocks_per_sm || r.twin ? blocks_per_sm : r.held;
}
// The keys one block of the plan reads at most (its split of the keys a row sees).
int plan_block_keys(const DecodeProblem& problem, const detail::PlanFields& p) {
  return p.split_tokens > 0 ? p.split_tokens : ceil_div(plan::decode_split_keys(problem, p.block_n), p.num_splits);
}
// Blocks of at most kShortBlockKeys keys on a tile whose uncapped variants instance has a twin
// with fewer warps (tiles::TileSummary::ShortTwin): the plan launches the twin, which an SM holds
// more of (Plan::short_twin_warps), where the grid then runs in fewer rounds of resident blocks
// and either more warps are resident (the 32-row tile's twin: 10 per SM against 8) or the twin
// runs the grid in one round (decode_mma_n8's twin holds 12 warps per SM, as its four-warp block
// does: over several rounds it measured slower). Otherwise the four-warp block, faster on its
// own, keeps them (docs/TUNING.md, "Kernels"). Counted after the splits, which the four-warp
// tile's count decides.
bool count_short_twin(const DecodeProblem& problem, const tiles::TileSummary& tile, const DeviceInfo& device,
                      detail::PlanFields* p) {
  const LaunchedRegisters r = launched_registers(problem, tile);
  const tiles::TileSummary::ShortTwin& twin = tile.short_twin;
  if (!r.variants || problem.softcap > 0.f || twin.warps == 0 || plan_block_keys(problem, *p) > kShortBlockKeys) {
    return false;
  }
  const int held = r.held > 0 ? std::min(r.held, p->blocks_per_sm) : p->blocks_per_sm;
  auto rounds = [&](int per_sm) { return grid_rounds(*p, device, per_sm); };
  const int smem_blocks = std::min(blocks_per_sm(device, twin.smem_bytes, 32 * twin.warps), twin.register_blocks);
  // A one-split plan merges no splits, so the twin's version without the cluster inbox, bound for
  // more blocks, may serve it; it does where those blocks save a round.
  const int bound_blocks = twin.bound_blocks > 0 && p->num_splits == 1
                               ? std::min(blocks_per_sm(device, twin.bound_smem_bytes, 32 * twin.warps), twin.bound_blocks)
                               : 0;
  const bool bound = bound_blocks > smem_blocks && rounds(bound_blocks) < rounds(smem_blocks);
  const int twin_blocks = bound ? bound_blocks : smem_blocks;
  const bool more_warps = twin_blocks * twin.warps > held * p->warps;
  if (twin_blocks <= held || rounds(twin_blocks) >= rounds(held) || !(more_warps || rounds(twin_blocks) == 1)) {
    return false;
  }
  p->short_twin_warps = twin.warps;
  p->warps = twin.warps;
  p->stages = twin.stages;
  p->smem_bytes = bound ? twin.bound_smem_bytes : twin.smem_bytes;
  p->blocks_per_sm = twin_blocks;
  if (bound) p->register_bound_blocks = bound_blocks;
  p->note += "; blocks of <= " + std::to_string(kShortBlockKeys) + " keys: the variants instance's " +
             std::to_string(twin.warps) + "-warp twin" + (bound ? " without the cluster inbox, register-bound" : "") +
             ", " + std::to_string(twin_blocks) + " blocks per SM (" + std::to_string(rounds(twin_blocks)) +
             " rounds of blocks, not " + std::to_string(rounds(held)) + ")";
  return true;
}

// PlanTuning::decode_stream: a one-split plan of short blocks (the gpt-oss rows: short windows over
// many sequences) whose blocks take more than one round runs the stream kernel instead, a
// persistent grid of one-warp blocks (TileSummary::stream_blocks per SM) whose warps each serve
// whole items; the plan's tile fields still describe the block kernel. On the 32-row tile the
// plans of its short twin take it (within one round the twin's blocks measured level or faster,
// docs/TUNING.md, "The stream kernel"). The 16-row tile's stream kernel serves the same uncapped
// variants plans where decode_mma is named (PlanOptions::family), which plan_decode does for the
// single-query rows decode_mma_n8 would serve (single_query_rows_stream); its 16-row plans by
// priority (q_len 2-4 at GQA 4-8, two tiles of 32 rows) are not measured on it and keep their
// blocks.
void choose_decode_stream(const DecodeProblem& problem, const tiles::TileSummary& tile, const PlanOptions& options,
                          const DeviceInfo& device, detail::PlanFields* p) {
  if (tile.stream_blocks == 0 || p->num_splits != 1 || p->split_tokens > 0 || p->cluster_combine ||
      p->fused_combine || device.cc_major < 8) {
    return;
  }
  if (tile.short_twin.warps > 0) {
    if (p->short_twin_warps == 0) return;
  } else {
    const LaunchedRegisters r = launched_registers(problem, tile);
    if (options.family != p->family || !r.variants || problem.softcap > 0.f ||
        plan_block_keys(problem, *p) > kShortBlockKeys) {
      return;
    }
  }
  if (grid_rounds(*p, device, p->blocks_per_sm) <= 1) {
    p->note += "; the stream kernel not taken: the block kernel's blocks fit one round";
    return;
  }
  p->persistent_blocks = device.sm_count * tile.stream_blocks;
  p->note += "; the stream kernel: " + std::to_string(p->persistent_blocks) + " one-warp blocks, a warp per item";
}

void count_register_blocks(const DecodeProblem& problem, const tiles::TileSummary& tile, const DeviceInfo& device,
                           detail::PlanFields* p) {
  if (count_short_twin(problem, tile, device, p)) return;
  const LaunchedRegisters r = launched_registers(problem, tile);
  const int held = r.held;
  if (held == 0 || held >= p->blocks_per_sm) return;
  const char* instance = !r.variants ? "the instance's" : "the variants instance's";
  if (r.twin) {
    // Rounds of resident blocks the grid runs in at `per_sm` blocks per SM.
    auto rounds = [&](int per_sm) { return grid_rounds(*p, device, per_sm); };
    const int bound = std::min(p->blocks_per_sm, tile.bound_variants_blocks);
    const int rounds_unbound = rounds(held), rounds_bound = rounds(bound);
    const bool latency_bound = plan_block_keys(problem, *p) <= kShortBlockKeys || rounds_bound == 1;
    if (rounds_bound < rounds_unbound && latency_bound) {  // bound > held: the twin holds more
      p->register_bound_blocks = bound;
      p->blocks_per_sm = bound;
      p->note += "; the variants instance register-bound for " + std::to_string(bound) + " blocks per SM (" +
                 std::to_string(rounds_bound) + (rounds_bound == 1 ? " round" : " rounds") + " of blocks, not " +
                 std::to_string(rounds_unbound) + ")";
      return;
    }
  }
  p->blocks_per_sm = held;
  p->note += std::string("; ") + instance + " registers hold " + std::to_string(held) + " blocks per SM";
}

void plan_stream_k_tail(const PrefillProblem& problem, const PlanOptions& options, int64_t tiles, detail::PlanFields* p) {
  const int blocks = p->persistent_blocks;
  const int64_t last_round = tiles % blocks;
  const int64_t steps = (int64_t(problem.max_kv_len) + p->block_n - 1) / p->block_n;
  const bool uniform = !p->dynamic_tiles && p->num_splits == 1 && p->strategy != Strategy::kTwoPass &&
                       p->packed_queries == 0 && !one_pass_variants(problem);
  if (!options.tuning.stream_k_prefill || !uniform || steps < kStreamKMinSteps || last_round == 0 ||
      5 * last_round > 4 * int64_t(blocks)) {
    return;
  }
  p->stream_k = true;
  p->stream_k_first_tile = int((tiles / blocks - 1) * blocks);
  p->stream_k_steps = int(steps);
  p->stream_k_workspace_offset = p->workspace_bytes;
  p->workspace_bytes =
      plan::stream_k_workspace(p->workspace_bytes, blocks - 1, p->block_m, problem.head_dim).total_bytes;
  p->note += "; a stream-K tail from tile " + std::to_string(p->stream_k_first_tile) + " (the last round would fill " +
             std::to_string(last_round) + " of " + std::to_string(blocks) + " blocks)";
}

// A persistent grid for tiles that keep two Q buffers: one block per SM (one fits) walks the grid's
// tiles; tiles of unequal cost (causal masks, ragged lengths) are claimed from a counter. A grid of
// no more tiles than SMs keeps one block per tile: its blocks would each take one tile anyway, and
// the counter's reset (a memset before every call) and claims would be all the persistent grid added.
Status plan_persistent_grid(const PrefillProblem& problem, const DeviceInfo& device, const PlanOptions& options,
                            detail::PlanFields* p) {
  const int64_t tiles = grid_blocks(*p);
  if (tiles <= device.sm_count) return Status::success();
  if (tiles > int64_t(INT32_MAX)) {
    return Status::invalid("batch", "a problem of at most 2^31 - 1 tiles of " + std::to_string(p->block_m) + " query rows",
                           std::to_string(tiles) + " tiles");
  }
  p->persistent_blocks = device.sm_count;
  p->dynamic_tiles = problem.causal || problem.varlen || problem.kv_cache;
  if (p->dynamic_tiles) p->workspace_bytes += plan::kTileCounterBytes;
  p->note += "; persistent grid of " + std::to_string(p->persistent_blocks) + " blocks over " + std::to_string(tiles) +
             (p->dynamic_tiles ? " tiles claimed from a counter" : " tiles in a fixed stride");
  plan_stream_k_tail(problem, options, tiles, p);
  return Status::success();
}

}  // namespace

namespace {

// options.family names a prefill family that reads KV caches: the decode problem runs as chunked prefill over its cache
// (Plan::decode_via_prefill). The decode-only merges do not apply there.
Status plan_decode_via_prefill(const DecodeProblem& problem, const DeviceInfo& device, const PlanOptions& options,
                               Plan* plan) {
  const std::string served = "options.family names a prefill family (" + options.family +
                             ": decode served by chunked prefill)";
  if (options.merge != Merge::kAuto && options.merge != Merge::kCombineKernel) {
    return Status::invalid("options.merge", "kAuto or kCombineKernel when " + served, to_string(options.merge));
  }
  if (options.split_tokens > 0) {
    return Status::invalid("options.split_tokens", "0 when " + served, std::to_string(options.split_tokens));
  }
  Plan planned;
  if (Status s = plan_prefill(plan::as_chunked_prefill(problem), device, options, &planned); !s) return s;
  detail::PlanFields p = detail::PlanEditor::fields(planned);
  p.kind = PlanKind::kDecode;
  p.decode = problem;
  p.decode_via_prefill = true;
  p.note = "decode served by chunked prefill over the cache (" + p.family + "); " + p.note;
  detail::PlanEditor::fields(*plan) = p;
  return Status::success();
}

// PlanTuning::prefill_route: the chunked-prefill families that serve speculative rows overflowing
// the 32-row decode tile better than the decode kernels, best first (none: the decode kernels).
// The thresholds (plan::kPrefillRoute*): docs/TUNING.md. rows: packed rows per KV head.
std::vector<const char*> prefill_route_families(const DecodeProblem& problem, int rows, const DeviceInfo& device,
                                                const PlanOptions& options) {
  const int64_t kv_heads = int64_t(problem.batch) * problem.num_kv_heads;
  const int64_t tokens = kv_heads * problem.max_kv_len;
  const bool decode_only_options = !options.family.empty() ||
                                   (options.merge != Merge::kAuto && options.merge != Merge::kCombineKernel) ||
                                   options.split_tokens > 0 ||
                                   (options.strategy != Strategy::kAuto && options.strategy != Strategy::kSplitKV);
  const bool wide_tree = problem.tree_mask && problem.q_len > detail::kMaxPrefillTreeDrafts;
  if (!options.tuning.prefill_route || decode_only_options || problem.sinks || softcap_or_window(problem) ||
      wide_tree || device.cc_major < 9 || !problem.causal ||
      problem.head_dim != 128 || reads_quantized_cache(problem) || rows < plan::kPrefillRouteMinRows ||
      rows > plan::kPrefillRouteMaxRows) {
    return {};
  }
  if (rows <= plan::kPrefillRouteNarrowMaxRows) {
    if (kv_heads < plan::kPrefillRouteNarrowMinKvHeads || tokens < plan::kPrefillRouteNarrowMinTokens) return {};
    return {plan::kPrefillRoute64RowFamily};
  }
  if (tokens < plan::kPrefillRouteWideMinTokens) return {};
  // Groups the 64-row tile cannot pack (> 8) fall to the other family in the list.
  if (kv_heads >= plan::kPrefillRouteWideTileMinKvHeads && tokens >= plan::kPrefillRouteWideTileMinTokens) {
    return {plan::kPrefillRoute128RowFamily, plan::kPrefillRoute64RowFamily};
  }
  return {plan::kPrefillRoute64RowFamily, plan::kPrefillRoute128RowFamily};
}

// options.family names a decode family whose kernels read the problem's KV format.
bool names_decode_family_reading(const PlanOptions& options, const DecodeProblem& problem) {
  const int named = options.family.empty() ? -1 : registry::find_family(options.family);
  if (named < 0) return false;
  const registry::Family& f = registry::families()[named];
  return f.kind == registry::Kind::kDecode && f.has_kv_format(detail::registry_kv_format(problem.kv_format, problem.dtype));
}

// A cache format whose decode kernels the planner does not choose on its own
// (KvFormatTraits::decode_kernels_by_default: the *_kc formats, docs/KV_FORMATS.md) is served by
// chunked prefill over its dequantized copy, which reads every format, whatever the rows. Options
// only the decode kernels take are refused by name rather than dropped.
Status plan_unread_format_via_prefill(const DecodeProblem& problem, const detail::KvFormatTraits& format,
                                      const DeviceInfo& device, const PlanOptions& options, Plan* plan) {
  const std::string why = std::string(format.name) +
                          ": the planner serves it by chunked prefill over the dequantized cache unless "
                          "options.family names a decode family that reads it";
  if (!options.family.empty()) {
    return Status::unsupported("options.family", why + " (" + options.family + " does not)");
  }
  if (options.strategy != Strategy::kAuto && options.strategy != Strategy::kSplitKV) {
    return Status::unsupported("options.strategy", why + " (auto or split-kv)");
  }
  if (options.merge != Merge::kAuto && options.merge != Merge::kCombineKernel) {
    return Status::unsupported("options.merge", why + " (kAuto or kCombineKernel)");
  }
  if (options.split_tokens > 0) return Status::unsupported("options.split_tokens", why + " (0)");
  if (options.tuning.l2_prefetch_keys > 0) {
    return Status::unsupported("options.tuning.l2_prefetch_keys", why + " (-1 or 0)");
  }
  PlanOptions routed = options;
  routed.tuning.l2_prefetch_keys = 0;  // a decode option; the prefill planner refuses it
  if (Status s = plan_decode_via_prefill(problem, device, routed, plan); !s) return s;
  detail::PlanEditor::fields(*plan).note += std::string("; ") + format.name + ": decode kernels only by options.family";
  return Status::success();
}

// Whether this build holds `family`'s instance for the problem's dtype and head dim over a cache
// of `kv_format`.
bool compiled_for(std::string_view family, const DecodeProblem& problem, KvFormat kv_format) {
  return registry::find_instance(registry::find_family(family), problem.dtype, problem.head_dim,
                                 detail::registry_kv_format(kv_format, problem.dtype)) >= 0;
}

}  // namespace

namespace {

Status plan_decode_fields(const DecodeProblem& problem, const DeviceInfo& device, const PlanOptions& options,
                          Plan* plan) {
  if (plan == nullptr) return Status::invalid("plan", "a non-null pointer", "nullptr");
  if (Status s = detail::validate_decode_problem(problem); !s) return s;
  if (Status s = detail::validate_device_info(device); !s) return s;
  if (Status s = check_decode_options(problem, device, options); !s) return s;
  // Packed query rows per KV head: a family with larger tiles serves KV heads with many rows.
  const int rows_per_kv = problem.q_len * (problem.num_q_heads / problem.num_kv_heads);
  for (const char* family : prefill_route_families(problem, rows_per_kv, device, options)) {
    PlanOptions routed = options;
    routed.family = family;
    // A problem the family cannot take (a group it cannot pack, say) tries the next, then the
    // decode kernels.
    if (compiled_for(family, problem, KvFormat::kNative) && plan_decode_via_prefill(problem, device, routed, plan).ok()) {
      detail::PlanEditor::fields(*plan).note += "; the planner's route for " + std::to_string(rows_per_kv) +
                    " packed rows per KV head (PlanTuning::prefill_route)";
      return Status::success();
    }
  }
  if (const int named = options.family.empty() ? -1 : registry::find_family(options.family);
      named >= 0 && registry::families()[named].kind == registry::Kind::kPrefill &&
      registry::families()[named].kv_caches != 0) {  // a family that reads KV caches (chunked prefill)
    return plan_decode_via_prefill(problem, device, options, plan);
  }
  if (const detail::KvFormatTraits format = detail::kv_format_traits(detail::resolve_kv_format(problem.kv_format, problem.dtype));
      !format.decode_kernels_by_default && !names_decode_family_reading(options, problem)) {
    return plan_unread_format_via_prefill(problem, format, device, options, plan);
  }
  if (options.strategy == Strategy::kSplitV || options.strategy == Strategy::kTwoPass) {
    return Status::unsupported("options.strategy", std::string(to_string(options.strategy)) +
                                                       " is a prefill strategy; decode offers auto, split-q and split-kv");
  }
  // Sinks enter once, where a row's partials are merged: by the combine kernel or a cluster's merge
  // (docs/VARIANTS.md).
  if (problem.sinks && (options.merge == Merge::kFused || options.merge == Merge::kAtomic)) {
    return Status::unsupported("options.merge", "kAuto, kCombineKernel or kCluster with sinks (the combine kernel or "
                                                "the cluster's merge folds them), not " +
                                                    std::string(to_string(options.merge)));
  }
  detail::PlanFields p;
  p.kind = PlanKind::kDecode;
  p.decode = problem;
  p.device = device;
  tiles::TileSummary tile;
  const Strategy served = options.strategy == Strategy::kSplitKV ? Strategy::kSplitKV : Strategy::kSplitQ;
  if (options.strategy == Strategy::kSplitQ && (options.num_splits > 1 || options.split_tokens > 0)) {
    return Status::invalid("options.strategy", "split-kv or auto when splits are requested", "split-q");
  }
  SplitDecision split;
  // Family, tile and splits for KV heads of `rows` packed rows.
  auto choose = [&](int rows) -> Status {
    if (Status s = choose_family_and_tile(registry::Kind::kDecode, served, problem.head_dim, problem.dtype,
                                          problem.kv_format, device, options, &p, &tile, false, false, rows);
        !s) {
      return s;
    }
    p.work_units = plan::decode_geometry(problem, tile.block_m).work_units;
    split = SplitDecision{};
    if (options.strategy == Strategy::kSplitQ) {
      split.note = "split-q requested: one split";
      return Status::success();
    }
    // A grid's last part-wave pays for splitting where the blocks are bound by the memory: 16-bit
    // caches, and INT4 codes dequantized for 8 rows. Blocks that dequantize for 16 rows are bound by
    // their own instructions (a tail wave of them runs nearly as fast as a full one), and 8-bit
    // codes measured no gain (docs/TUNING.md, "Split counts").
    const tiles::KvCodeBits bits = quantized_code_bits(problem);
    const bool memory_bound = bits.v_bits == 0 || (tile.block_m <= 8 && bits.k_bits == 4);
    return decide_splits(options, p.work_units, plan::decode_split_keys(problem, p.block_n), p.block_n, device,
                         decode_slots_per_sm(problem, split_blocks_per_sm(problem, tile, p.blocks_per_sm)),
                         bits.v_bits, memory_bound, &split);
  };
  if (Status s = choose(rows_per_kv); !s) return s;
  // A larger-tile family halves the blocks per split. Where that leaves SMs without a block and the
  // 16-row tiles make a larger grid, the 16-row tiles measured faster; with a block for every SM the
  // larger tile was (docs/TUNING.md, "Decode tiles").
  const int min_rows = registry::families()[registry::find_family(p.family)].min_rows;
  const bool auto_splits = options.num_splits == 0 && options.split_tokens == 0 && options.strategy != Strategy::kSplitQ;
  const int slots = device.sm_count * decode_slots_per_sm(problem, split_blocks_per_sm(problem, tile, p.blocks_per_sm));
  if (options.family.empty() && min_rows > 1 && auto_splits && p.work_units * split.num_splits < slots) {
    // Before giving up the larger tile, let it split its keys finer: a 32-row block does twice a
    // 16-row block's work per key, so splits of half the keys amortise its fixed cost as well. It
    // takes as many splits as fit its resident block slots in one wave: these blocks are bound by
    // their own work, not by the memory, so an SM holding one block more than another sets the time.
    const int keys_allow = ceil_div(plan::decode_split_keys(problem, p.block_n), kMinKeysPerExtraSplit / 2);
    const int cap = options.max_splits > 0 ? options.max_splits : plan::kMaxAutoSplits;
    const int finer = std::min({int(slots / p.work_units), keys_allow, cap});
    if (finer > split.num_splits && p.work_units * finer >= device.sm_count) {
      split.num_splits = finer;
      split.note = std::to_string(p.work_units) + " work units of 32 rows x " + std::to_string(finer) +
                   " splits of >= " + std::to_string(kMinKeysPerExtraSplit / 2) + " keys fill " +
                   std::to_string(slots) + " block slots in one wave";
    }
  }
  const int64_t larger_blocks = p.work_units * split.num_splits;
  if (options.family.empty() && min_rows > 1 && larger_blocks < device.sm_count) {
    const detail::PlanFields larger = p;
    const tiles::TileSummary larger_tile = tile;
    const SplitDecision larger_split = split;
    if (choose(min_rows - 1) && p.work_units * split.num_splits > larger_blocks) {
      split.note += "; " + larger.family + " would leave SMs without a block";
    } else {  // no smaller-tile family, or no larger grid from it: keep the larger tile
      p = larger;
      tile = larger_tile;
      split = larger_split;
    }
  }
  // Short rows on a small grid: 8 splits merged in a cluster, decided before the grid is set.
  const bool auto_cluster =
      short_rows_merge_in_cluster(problem, options, device, tile.block_m, p.block_n, p.work_units, auto_splits,
                                  split.num_splits);
  if (auto_cluster) {
    split.num_splits = plan::kAutoClusterSplits;
    split.note += "; short rows: " + std::to_string(plan::kAutoClusterSplits) +
                  " splits merged in a thread-block cluster, one launch (Merge::kAuto)";
  }
  // Disjoint from the short-rows rule (that one needs >= 8 planned splits and sets 8).
  const bool pair_cluster =
      two_splits_merge_in_cluster(problem, options, device, tile.block_m, auto_splits, split.num_splits);
  if (pair_cluster) split.note += "; the 2 splits merged in clusters of 2, one launch (Merge::kAuto)";
  const plan::DecodeGeometry g = plan::decode_geometry(problem, tile.block_m);
  p.num_splits = split.num_splits;
  p.split_tokens = split.split_tokens;
  p.strategy = (p.num_splits > 1 || p.split_tokens > 0) ? Strategy::kSplitKV : Strategy::kSplitQ;
  p.note = split.note;
  if (Status s = set_grid(g.grid(p.num_splits), "num_q_heads", "batch", &p); !s) return s;
  count_register_blocks(problem, tile, device, &p);
  const bool requested_cluster = options.merge == Merge::kCluster && device.cc_major >= 9 && p.num_splits > 1 &&
                                 p.num_splits <= plan::kMaxClusterSplits && p.split_tokens == 0;
  if (requested_cluster) p.note += "; splits merged in a thread-block cluster";
  p.cluster_combine = requested_cluster || auto_cluster || pair_cluster;
  // A cluster merge needs no counters; with one split there is nothing to merge.
  p.fused_combine = options.merge == Merge::kFused && p.num_splits > 1;
  if (p.fused_combine) p.note += "; splits merged by each tile's last split block (fused combine)";
  if (options.tuning.decode_stream) choose_decode_stream(problem, tile, options, device, &p);
  const int64_t tile_counters = p.fused_combine ? g.work_units : 0;  // one per (sequence, KV head, query tile)
  p.workspace_bytes =
      p.cluster_combine ? 0 : plan::split_workspace(p.num_splits, g.out_rows, problem.head_dim, tile_counters).total_bytes;
  if (problem.sinks) {
    p.note += p.num_splits == 1   ? "; sinks folded into the final rows by the decode kernel"
              : p.cluster_combine ? "; sinks folded once by the cluster's merge"
                                  : "; sinks folded once by the combine kernel's merge";
  }
  if (options.merge == Merge::kAtomic) {
    if (Status s = check_atomic_combine(options); !s) return s;
    p.atomic_combine = p.num_splits > 1;
    p.atomic_reference_lse = options.atomic_reference_lse;
  }
  if (p.atomic_combine) {
    p.note += "; splits added atomically around LSE " + std::to_string(p.atomic_reference_lse) +
              ", then normalized (nondeterministic)";
    p.workspace_bytes = plan::atomic_combine_workspace(p.num_splits, g.out_rows, problem.head_dim).total_bytes;
  }
  // (The stream kernel's persistent grid places its own blocks.)
  p.launch_smem_bytes = p.persistent_blocks > 0 ? 0 : even_placement_smem_bytes(options, device, p);
  p.l2_prefetch = options.tuning.l2_prefetch && device.cc_major >= 9;
  p.l2_prefetch_keys = l2_prefetch_keys(problem, options, device, p);
  if (p.l2_prefetch_keys > 0) {
    p.note += "; blocks prefetch their first " + std::to_string(p.l2_prefetch_keys) +
              " keys into L2 before the PDL wait";
  }
  detail::PlanEditor::fields(*plan) = p;
  return Status::success();
}

// PlanTuning::mixed_route (docs/MIXED_BATCH.md): a serving step's varlen batch over a paged cache
// serves its sequences of at most kMixedDecodeRows packed rows per KV head on the decode kernels,
// in two parts as separate decode calls would: single-query rows (the narrowest tile) and rows of
// 2..decode_q queries (the 16-row tile), each a decode plan for the step's bounds (every sequence
// may be such a row, at the longest length), beside the prefill plan's kernels for the rest. A
// persistent prefill grid leaves a share of the SMs to the decode blocks. Where the route does not
// apply, the plan says why and runs as before.
constexpr int kMixedDecodeRows = 16;     // the 16-row decode tile
constexpr int kMixedDecodeSmShare = 4;   // 1 / 4 of the SMs kept from a persistent prefill grid

void plan_mixed_route(const PrefillProblem& problem, const DeviceInfo& device, const PlanOptions& options,
                      detail::PlanFields* p) {
  // Only a paged cache's varlen queries make a serving step; other problems hear nothing of it.
  if (!options.tuning.mixed_route || !problem.kv_cache || !problem.varlen || problem.page_size == 0) return;
  const char* why = nullptr;
  if (device.cc_major < 9) {
    why = "it runs on sm_90";
  } else if (p->strategy == Strategy::kTwoPass || p->strategy == Strategy::kSplitV || p->stream_k) {
    why = "it runs beside the one-pass kernels without a stream-K tail";
  }
  const int group = problem.num_q_heads / problem.num_kv_heads;
  const int decode_q = std::max(1, kMixedDecodeRows / group);
  // The decode parts' plans: the decode kernels' own choice for each row kind, with whole splits
  // packed onto the SMs the prefill grid leaves (no even placement: it assumes every SM free).
  auto plan_part = [&](int q_len, Plan* part) {
    PlanOptions o;
    o.tuning = options.tuning;
    o.tuning.prefill_route = false;  // the decode parts are the decode kernels' by definition
    o.tuning.even_placement = false;
    const DecodeProblem rows = plan::as_decode_rows(problem, q_len);
    return plan_decode(rows, device, o, part).ok() && !part->decode_via_prefill() &&
           compiled_for(part->family(), rows, rows.kv_format);
  };
  Plan single, spec;
  if (why == nullptr && (!plan_part(1, &single) || (decode_q > 1 && !plan_part(decode_q, &spec)))) {
    why = "the decode kernels do not serve this problem's rows in this build";
  }
  if (why != nullptr) {
    p->note += std::string("; mixed route not taken: ") + why;
    return;
  }
  p->mixed_decode = std::make_shared<const Plan>(single);
  p->mixed_decode_q = decode_q;
  p->mixed_decode_offset = plan::align_up(p->workspace_bytes);
  p->mixed_spec_offset = p->mixed_decode_offset + plan::align_up(single.workspace_bytes());
  p->mixed_scratch_offset = p->mixed_spec_offset;
  if (decode_q > 1) {
    p->mixed_spec = std::make_shared<const Plan>(spec);
    p->mixed_scratch_offset += plan::align_up(spec.workspace_bytes());
  }
  p->workspace_bytes = p->mixed_scratch_offset +
                       plan::mixed_scratch(problem.batch, decode_q, problem.num_q_heads, problem.head_dim,
                                           int(detail::block_table_pages(problem.max_kv_len, problem.page_size)))
                           .total_bytes;
  p->mixed_serial = options.tuning.mixed_route_serial;
  if (p->persistent_blocks > 0 && !p->mixed_serial) {
    p->mixed_beside_blocks = std::max(1, std::min(p->persistent_blocks, device.sm_count - device.sm_count / kMixedDecodeSmShare));
  }
  p->note += "; mixed route: single-query sequences on " + single.family() + " (" +
             std::to_string(single.num_splits()) + " splits)";
  if (decode_q > 1) {
    p->note += ", sequences of 2-" + std::to_string(decode_q) + " queries on " + spec.family() + " (" +
               std::to_string(spec.num_splits()) + " splits)";
  }
  p->note += p->mixed_serial ? " after the prefill tiles" : " beside the prefill tiles";
}

Status plan_prefill_fields(const PrefillProblem& problem, const DeviceInfo& device, const PlanOptions& options,
                           Plan* plan) {
  if (plan == nullptr) return Status::invalid("plan", "a non-null pointer", "nullptr");
  if (Status s = detail::validate_prefill_problem(problem); !s) return s;
  if (Status s = detail::validate_device_info(device); !s) return s;
  if (!known_merge(options.merge)) {
    return Status::invalid("options.merge", "a Merge value", std::to_string(int(options.merge)));
  }
  if (options.merge != Merge::kAuto && options.merge != Merge::kCombineKernel) {
    return Status::unsupported("options.merge", std::string(to_string(options.merge)) +
                                                    " is a decode merge (prefill splits use the combine kernel)");
  }
  if (options.tuning.l2_prefetch_keys > 0) {
    return Status::unsupported("options.tuning.l2_prefetch_keys",
                               "the L2 prefetch of keys is a decode option (0 or -1 here)");
  }
  if (options.split_tokens > 0) {
    return Status::unsupported("options.split_tokens", "batch-invariant splits are a decode option");
  }
  const Strategy requested = options.strategy;
  detail::PlanFields p;
  p.kind = PlanKind::kPrefill;
  p.prefill = problem;
  p.device = device;
  tiles::TileSummary tile;
  const Strategy served = requested == Strategy::kAuto ? Strategy::kSplitQ : requested;
  // A quantized cache is dequantized once into a 16-bit contiguous copy, which the family reads: the
  // prefill re-reads every K/V tile once per query block and head, so dequantizing per tile would
  // repeat the conversion that many times.
  const detail::KvFormatTraits format =
      detail::kv_format_traits(detail::resolve_kv_format(problem.kv_format, problem.dtype));
  p.dequantized_cache = problem.kv_cache && format.quantized;
  const bool paged_read = problem.page_size > 0 && !p.dequantized_cache;  // the copy is contiguous
  if (Status s = choose_family_and_tile(registry::Kind::kPrefill, served, problem.head_dim, problem.dtype,
                                        p.dequantized_cache ? KvFormat::kNative : problem.kv_format, device, options,
                                        &p, &tile, problem.kv_cache, paged_read);
      !s) {
    return s;
  }
  std::string tile_note;
  prefer_sm90_tile_variant(problem, served, paged_read, device, options, &p, &tile, &tile_note);
  if (Status s = plan_gqa_packing(problem, served, paged_read, device, options, &p, &tile, &tile_note); !s) return s;
  const plan::PrefillGeometry g = plan::prefill_geometry(problem, tile.block_m, p.packed_queries);
  p.work_units = g.work_units;

  // The softcap, the window and sinks run in the one-pass kernels' variants instances (no
  // two-pass, no split-V; after KV splits the combine folds the sinks); a left window reads a band
  // of keys, so KV splits of the whole length would be mostly empty: one split unless asked for.
  const bool variants = one_pass_variants(problem);
  if (variants && (requested == Strategy::kSplitV || requested == Strategy::kTwoPass)) {
    return Status::unsupported(one_pass_variants_argument(problem),
                               "served by the one-pass prefill kernels only, not with strategy " +
                                   std::string(to_string(requested)));
  }
  SplitDecision split;
  if (variants && problem.window_left >= 0 && requested == Strategy::kAuto && options.num_splits == 0) {
    split.note = "a sliding window: one KV split";
  } else if (requested == Strategy::kSplitV || requested == Strategy::kTwoPass || requested == Strategy::kSplitQ) {
    if (options.num_splits > 1) {
      return Status::invalid("options.num_splits", "0 or 1 with strategy " + std::string(to_string(requested)),
                             std::to_string(options.num_splits));
    }
    split.note = std::string(to_string(requested)) + " requested";
  } else if (Status s = decide_splits(options, p.work_units, problem.max_kv_len, p.block_n, device, 1, 0, false, &split);
             !s) {
    return s;
  }
  p.num_splits = split.num_splits;
  p.strategy = requested == Strategy::kAuto || requested == Strategy::kSplitKV
                   ? (p.num_splits > 1 ? Strategy::kSplitKV : Strategy::kSplitQ)
                   : requested;
  if (p.strategy == Strategy::kSplitKV && !registry::families()[registry::find_family(p.family)].serves(p.strategy)) {
    return Status::unsupported("options.family", "kernel family " + p.family + " does not serve split-kv");
  }
  p.note = split.note;
  if (!tile_note.empty()) p.note += "; " + tile_note;
  if (p.dequantized_cache) {
    p.staging_bytes =
        plan::kv_staging(problem.batch, problem.max_kv_len, problem.num_kv_heads, problem.head_dim).total_bytes;
    p.note += std::string("; the ") + format.name + " cache is dequantized to " + to_string(problem.dtype) +
              " in the workspace first";
  }
  if (Status s = set_grid(g.grid(p.num_splits), "num_q_heads", "batch", &p); !s) return s;
  p.workspace_bytes = p.staging_bytes + (p.strategy == Strategy::kTwoPass
                                             ? plan::two_pass_workspace(g.out_rows).total_bytes
                                             : plan::split_workspace(p.num_splits, g.out_rows, problem.head_dim).total_bytes);
  if (tile.persistent && options.tuning.persistent_prefill) {
    if (Status s = plan_persistent_grid(problem, device, options, &p); !s) return s;
  }
  plan_mixed_route(problem, device, options, &p);
  detail::PlanEditor::fields(*plan) = p;
  return Status::success();
}

}  // namespace

// PlanTuning::decode_stream for single-query rows (8 or fewer packed rows, decode_mma_n8's by
// priority) of short blocks over several rounds: the 16-row tile's stream kernel where it takes
// them (a 16-bit cache at D=64), measured faster than decode_mma_n8's blocks (docs/TUNING.md, "The
// stream kernel"). It replans (decode_mma named) only where choose_decode_stream could take the
// rows: one split, the uncapped variants instance, a head dim whose 16-row tile has a stream
// kernel; most n8 plans are none of these and are not planned twice.
static bool single_query_rows_stream(const DecodeProblem& problem, const DeviceInfo& device,
                                     const PlanOptions& options, const Plan& n8, Plan* streamed) {
  if (!options.family.empty() || !options.tuning.decode_stream || n8.family() != "decode_mma_n8") return false;
  const bool uncapped_variants =
      (softcap_or_window(problem) || problem.sinks || problem.tree_mask) && !(problem.softcap > 0.f);
  const int index = registry::find_family("decode_mma");
  if (n8.num_splits() != 1 || !uncapped_variants || index < 0 ||
      registry::families()[index].tile(problem.head_dim, detail::resolve_kv_format(problem.kv_format, problem.dtype))
              .stream_blocks == 0) {
    return false;
  }
  PlanOptions named = options;
  named.family = "decode_mma";
  if (!plan_decode_fields(problem, device, named, streamed).ok() || streamed->persistent_blocks() == 0) return false;
  detail::PlanEditor::fields(*streamed).note +=
      "; single-query rows of short blocks: the 16-row tile's stream kernel rather than decode_mma_n8's blocks";
  return true;
}

Status plan_decode(const DecodeProblem& problem, const DeviceInfo& device, const PlanOptions& options, Plan* plan) {
  const Status s = plan_decode_fields(problem, device, options, plan);
  if (!s) return s;
  Plan streamed;
  if (single_query_rows_stream(problem, device, options, *plan, &streamed)) *plan = streamed;
  detail::PlanEditor::fields(*plan).seal = detail::plan_seal(*plan);
  return s;
}

Status plan_prefill(const PrefillProblem& problem, const DeviceInfo& device, const PlanOptions& options,
                    Plan* plan) {
  const Status s = plan_prefill_fields(problem, device, options, plan);
  if (s) detail::PlanEditor::fields(*plan).seal = detail::plan_seal(*plan);
  return s;
}

}  // namespace splitkv
