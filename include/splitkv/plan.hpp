// The planner: a pure host function from (problem, device description, options) to a Plan.
// Plan once, run many times: run_*() takes the plan and never allocates or synchronizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "splitkv/problem.hpp"
#include "splitkv/status.hpp"

namespace splitkv {

// What the planner needs to know about the GPU. query_device() fills it from the runtime;
// DeviceInfo::h200() describes the card the defaults were tuned on (for planning without a GPU).
struct DeviceInfo {
  int sm_count = 132;
  int smem_per_sm_bytes = 228 * 1024;
  int smem_per_block_bytes = 227 * 1024;  // opt-in maximum for one block
  int64_t l2_bytes = 60ll * 1024 * 1024;
  int cc_major = 9;
  int cc_minor = 0;

  static DeviceInfo h200() { return DeviceInfo{}; }
};

enum class Strategy {
  kAuto,     // planner's choice
  kSplitQ,   // blocks over (batch, head, query block); each walks all of K/V
  kSplitKV,  // blocks also over chunks of the KV sequence; partials merged by a combine kernel
  kSplitV,   // prefill: warps partition the head-dim columns of V/O (recomputing QK^T each)
  kTwoPass,  // prefill: a row-statistics kernel, then a softmax*V kernel
};
const char* to_string(Strategy strategy);

// How a decode plan's KV splits are merged (PlanOptions::merge). Every merge but kAtomic gives the
// same bits as the combine kernel.
enum class Merge {
  // The planner's choice: the combine kernel, or on sm_90 a merge inside a thread-block cluster
  // where that measured faster: short rows on small grids (8 splits merged in clusters) and exactly
  // 2 planned splits of single-query rows over a 16-bit cache (clusters of 2). Evidence:
  // docs/TUNING.md, "Cluster merges".
  kAuto,
  // Always the combine kernel after the split kernel (a second launch, partials in the workspace).
  kCombineKernel,
  // Decode on sm_90: when a row's splits fit in one cluster (<= 16), merged through distributed
  // shared memory in the split kernel (no workspace, no combine launch); otherwise the combine
  // kernel. Batch-invariant mode (split_tokens) always uses the combine kernel. Sinks are folded
  // into the merged rows. Why it is not the default beyond kAuto's cases: docs/TUNING.md.
  kCluster,
  // Decode: the last split block of each tile of rows to finish merges the tile's partials in the
  // split kernel (no combine launch). Arrival counters live in the workspace: call
  // prepare_workspace(plan) on a new workspace and after any other plan used it (run_decode refuses
  // a workspace not prepared for this plan since); each call leaves them at zero for the next.
  // Measured slower than the combine kernel on long rows (docs/TUNING.md). Refuses sinks.
  kFused,
  // Decode, NONDETERMINISTIC (the original design's atomic reduction): each split adds
  // exp(LSE_i - atomic_reference_lse) * O_i and its weight into fp32 rows with atomic adds, and one
  // normalization kernel divides (FlashDecoding++'s unified reference instead of a max over the
  // splits). Splits whose LSE lies more than 40 from the reference, empty splits and poisoned ones
  // write ordinary partials instead, which the normalization merges exactly, so any reference gives
  // a correct result; one near the rows' typical LSE (natural log of the sum of exp(scaled score))
  // keeps most splits on the atomic path. The order of the adds varies, so the last bits of the
  // output may differ run to run. Not with split_tokens nor sinks. prepare_workspace as for kFused.
  // Measured slower than the combine kernel (docs/TUNING.md).
  kAtomic,
};
const char* to_string(Merge merge);

// The planner's rule switches: each rule is on where it measured faster (docs/TUNING.md has the
// rule and its evidence); turning one off keeps the plain kernel, with the same results.
struct PlanTuning {
  // Decode, sm_90: causal speculative rows at D=128 over a 16-bit cache with more packed query rows
  // per KV head than 3/4 of the 32-row decode tile run as chunked prefill on wgmma tiles
  // (Plan::decode_via_prefill), on large enough grids. Not with options that only the decode kernels
  // honour (a family, a merge other than kAuto/kCombineKernel, split_tokens, split-q, L2 key
  // prefetch). Context shards need the decode kernels: plan_sharded_decode turns it off.
  bool prefill_route = true;
  // Prefill, sm_90: prefill_sm90 tiles at head dims <= 128 on a persistent grid (Plan::persistent_blocks)
  // when there are more tiles than SMs.
  bool persistent_prefill = true;
  // Prefill, sm_90: a persistent grid of uniform tiles whose last round would leave more than a fifth
  // of the blocks idle ends in a stream-K tail (Plan::stream_k), merged in key order (same bits every run).
  bool stream_k_prefill = true;
  // Decode, sm_90: before its programmatic-dependent-launch wait a block prefetches its Q rows and
  // its length's line into L2 (l2_prefetch) and may prefetch its split's first keys
  // (l2_prefetch_keys: -1 the planner's rule, reported in Plan::l2_prefetch_keys; 0 none;
  // 1..max_kv_len that many keys, which needs l2_prefetch and an sm_90 device). Hints only.
  bool l2_prefetch = true;
  int l2_prefetch_keys = -1;
  // Decode: a one-wave grid with fewer blocks per SM than shared memory allows asks for enough
  // shared memory per block that no SM holds more than ceil(blocks / SMs) (Plan::launch_smem_bytes),
  // so blocks placed beside a kernel still running do not double up. Not with cluster merges.
  bool even_placement = true;
  // Prefill over a paged decode cache with varlen queries (a serving step's chunks and rows), sm_90:
  // the sequences of at most Plan::mixed_decode_q queries run on the decode kernels (decode plans
  // for the step's bounds: Plan::mixed_decode_plan for single-query rows, Plan::mixed_spec_plan for
  // longer ones) beside the chunked-prefill kernels for the rest, on two streams joined inside the
  // call (capturable; the prefill part's blocks first), a quarter of the prefill grid's blocks
  // leaving their SMs to the decode blocks where the step has decode rows. On: with decode rows it
  // measured 1.0-6.9x the one call, on chunks alone level (docs/MIXED_BATCH.md).
  bool mixed_route = true;
  // With mixed_route: the parts one after the other on the caller's stream (the prefill part on
  // its whole grid first, then the decode parts), not side by side (docs/MIXED_BATCH.md).
  bool mixed_route_serial = false;
  // Decode: the one-split plans of the 32-row tile's short twin (short sliding windows over many
  // sequences at D=64) whose blocks take more than one round run on the stream kernel instead, a
  // persistent grid of one-warp blocks, each warp serving whole items one after another
  // (kernels/decode/decode_stream_kernel.cuh; Plan::persistent_blocks on a decode plan).
  bool decode_stream = true;
};

struct PlanOptions {
  Strategy strategy = Strategy::kAuto;
  // > 0 forces this many KV splits (clamped to the number of KV blocks; the plan says so).
  int num_splits = 0;
  // > 0 caps the number of splits: one captured CUDA graph then serves every length up to
  // max_kv_len with a workspace of known size.
  int max_splits = 0;
  // Batch-invariant mode (decode): > 0 fixes each split at this many tokens (a multiple of the
  // kernel's KV block), so a sequence's result does not depend on its batch-mates or the batch size.
  int split_tokens = 0;
  // Empty: the planner chooses the kernel family (the highest-priority registered family that
  // serves the problem, the strategy and the device, preferring ones compiled into this build).
  // Otherwise the family of that name, or an error saying why it cannot serve (kernel_families()
  // lists them; `splitkv families` prints them).
  std::string family;
  // How decode splits are merged (see Merge). Prefill plans take kAuto or kCombineKernel.
  Merge merge = Merge::kAuto;
  float atomic_reference_lse = 0.f;  // Merge::kAtomic: the reference LSE (finite)
  PlanTuning tuning;
};

enum class PlanKind { kDecode, kPrefill };

class Plan;

namespace detail {

struct PlanEditor;

// What a plan holds. The planner writes it; callers read it through Plan's accessors.
struct PlanFields {
  PlanKind kind = PlanKind::kDecode;
  DecodeProblem decode;    // valid when kind == kDecode
  PrefillProblem prefill;  // valid when kind == kPrefill
  DeviceInfo device;

  Strategy strategy = Strategy::kSplitQ;
  std::string family;    // the kernel family that runs (see kernel_families())
  int num_splits = 1;    // KV chunks per (sequence, KV head); 1 = no combine step
  int split_tokens = 0;  // > 0: fixed chunk (batch-invariant); 0: each sequence split evenly
  // How the splits are merged (PlanOptions::merge, resolved): at most one of these is set; none
  // with splits: the combine kernel.
  bool cluster_combine = false;  // inside a thread-block cluster (Merge::kCluster)
  bool fused_combine = false;    // by each tile's last split block (Merge::kFused)
  bool atomic_combine = false;   // atomic adds, then a normalization (Merge::kAtomic)
  float atomic_reference_lse = 0.f;
  // Decode on sm_90: what each block prefetches into L2 before its PDL wait (see PlanTuning):
  // its Q rows and length's line, and this many keys of its split (0: none).
  bool l2_prefetch = false;
  int l2_prefetch_keys = 0;
  // Prefill over a quantized KV cache (kv_cache with an FP8/INT8/INT4/K8V4 kv_format): run_prefill
  // first dequantizes each sequence's cached tokens into a 16-bit copy at the start of the
  // workspace (staging_bytes of it), then the family reads that copy as a contiguous cache.
  bool dequantized_cache = false;
  size_t staging_bytes = 0;
  int block_m = 0;       // query rows per thread block
  int block_n = 0;       // keys per main-loop step of a thread block
  int warps = 0;
  int stages = 0;        // cp.async pipeline depth
  int smem_bytes = 0;
  int blocks_per_sm = 0; // resident blocks per SM: what shared memory allows, or registers where fewer (register_bound_blocks)
  // > smem_bytes: shared memory each block asks for at launch, so that an SM holds at most
  // ceil(blocks / SMs) of this one-wave grid (PlanTuning::even_placement); 0: smem_bytes.
  int launch_smem_bytes = 0;
  // > 0: the family's variants instance holds fewer resident blocks by its registers than its
  // shared memory allows, and the plan launches its twin register-bound for this many (it spills a
  // few values), which runs the grid in fewer rounds of resident blocks; blocks_per_sm then counts
  // it. 0: the instance as it is (blocks_per_sm then counts what its registers hold, where fewer
  // than its shared memory allows).
  int register_bound_blocks = 0;
  // > 0: the plan launches the family's variants instance in its twin for blocks of few keys (a
  // short sliding window), which has this many warps (warps, stages, smem_bytes and blocks_per_sm
  // then describe the twin). 0: the instance as it is.
  int short_twin_warps = 0;
  int64_t work_units = 0;  // thread blocks before splitting (decode: batch * Hkv * m tiles)
  int grid[3] = {1, 1, 1};
  // Prefill on sm_90 (prefill_sm90 tiles at head dims <= 128, more tiles than SMs): > 0 launches
  // this many blocks (one per SM), which walk grid[] as a list of tiles, loading the next tile's Q
  // and first K/V tiles while they finish the current one. dynamic_tiles: they claim tiles from a counter in the
  // workspace (causal, varlen or cache problems, whose tiles differ in cost; run_prefill zeroes the
  // counter before each launch); otherwise each takes every persistent_blocks-th tile.
  int persistent_blocks = 0;
  bool dynamic_tiles = false;
  // A static persistent grid's stream-K tail (see PlanTuning::stream_k_prefill): tiles from
  // stream_k_first_tile on are shared out by key steps, one equal range per block; run_prefill
  // zeroes the parts' counters in the workspace before each launch. 0 / false: whole tiles.
  bool stream_k = false;
  int stream_k_first_tile = 0;
  int stream_k_steps = 0;                 // key steps (block_n keys each) of every tile
  size_t stream_k_workspace_offset = 0;   // where the parts' slots and counters begin in the workspace
  // Prefill with GQA packing (family prefill_sm90_gqa): a tile holds the Hq / Hkv query heads of one
  // KV head with packed_queries queries each (block_m / group in whole 8-row atoms), and grid[1] counts
  // KV heads; 0: a tile holds block_m queries of one query head.
  int packed_queries = 0;
  // A decode plan served by a chunked-prefill family over the cache (options.family named one, e.g.
  // prefill_sm90_gqa64 for speculative rows): `prefill` is the equivalent problem (each sequence's
  // q_len queries after its cached keys, padded, bottom-right causal) and every other field is its
  // plan; run_decode runs it through run_prefill. Context shards (keys_after, caller partials) are
  // refused there.
  bool decode_via_prefill = false;
  // A prefill plan on the mixed route (PlanTuning::mixed_route): single-query sequences are served
  // by `mixed_decode` (a decode plan for batch sequences of one query over the same cache), those of
  // 2..mixed_decode_q queries by `mixed_spec` (the same for mixed_decode_q queries; null where
  // mixed_decode_q is 1), the rest by this plan's prefill family. The workspace holds this plan's
  // own first, then mixed_decode's at mixed_decode_offset and mixed_spec's at mixed_spec_offset,
  // then the decode parts' padded queries, outputs and lengths at mixed_scratch_offset
  // (plan::mixed_scratch).
  std::shared_ptr<const Plan> mixed_decode, mixed_spec;
  int mixed_decode_q = 0;
  bool mixed_serial = false;  // PlanTuning::mixed_route_serial: the parts one after the other
  // Side by side on a persistent prefill grid: of its persistent_blocks, the blocks that walk its
  // tiles when the step has decode rows (the others exit at once and leave their SMs to the decode
  // parts); a step without decode rows keeps all of them. 0: the route is serial or not taken.
  int mixed_beside_blocks = 0;
  size_t mixed_decode_offset = 0, mixed_spec_offset = 0, mixed_scratch_offset = 0;
  size_t workspace_bytes = 0;  // caller-provided workspace run() needs (0: none)
  std::string note;            // why the planner chose what it chose
  // Set by plan_decode / plan_prefill: a hash of every field above but `note`. run_* refuses a
  // plan whose fields changed after planning (they size the grid, partials and workspace offsets):
  // plan again instead of editing one.
  uint64_t seal = 0;
};

}  // namespace detail

// A plan: what plan_decode / plan_prefill decided, read through its accessors (each one returns the
// field of detail::PlanFields of that name, documented there). run_*() take it as planned (its seal).
class Plan {
 public:
  using Kind = PlanKind;
  Kind kind() const { return f_.kind; }
  const DecodeProblem& decode() const { return f_.decode; }
  const PrefillProblem& prefill() const { return f_.prefill; }
  const DeviceInfo& device() const { return f_.device; }
  Strategy strategy() const { return f_.strategy; }
  const std::string& family() const { return f_.family; }
  int num_splits() const { return f_.num_splits; }
  int split_tokens() const { return f_.split_tokens; }
  bool cluster_combine() const { return f_.cluster_combine; }
  bool fused_combine() const { return f_.fused_combine; }
  bool atomic_combine() const { return f_.atomic_combine; }
  float atomic_reference_lse() const { return f_.atomic_reference_lse; }
  bool l2_prefetch() const { return f_.l2_prefetch; }
  int l2_prefetch_keys() const { return f_.l2_prefetch_keys; }
  bool dequantized_cache() const { return f_.dequantized_cache; }
  size_t staging_bytes() const { return f_.staging_bytes; }
  int block_m() const { return f_.block_m; }
  int block_n() const { return f_.block_n; }
  int warps() const { return f_.warps; }
  int stages() const { return f_.stages; }
  int smem_bytes() const { return f_.smem_bytes; }
  int blocks_per_sm() const { return f_.blocks_per_sm; }
  int launch_smem_bytes() const { return f_.launch_smem_bytes; }
  int register_bound_blocks() const { return f_.register_bound_blocks; }
  int short_twin_warps() const { return f_.short_twin_warps; }
  const int (&grid() const)[3] { return f_.grid; }
  int persistent_blocks() const { return f_.persistent_blocks; }
  bool dynamic_tiles() const { return f_.dynamic_tiles; }
  bool stream_k() const { return f_.stream_k; }
  int stream_k_first_tile() const { return f_.stream_k_first_tile; }
  int stream_k_steps() const { return f_.stream_k_steps; }
  size_t stream_k_workspace_offset() const { return f_.stream_k_workspace_offset; }
  int packed_queries() const { return f_.packed_queries; }
  bool decode_via_prefill() const { return f_.decode_via_prefill; }
  bool mixed_route() const { return f_.mixed_decode != nullptr; }
  const Plan* mixed_decode_plan() const { return f_.mixed_decode.get(); }
  const Plan* mixed_spec_plan() const { return f_.mixed_spec.get(); }
  int mixed_decode_q() const { return f_.mixed_decode_q; }
  bool mixed_serial() const { return f_.mixed_serial; }
  int mixed_beside_blocks() const { return f_.mixed_beside_blocks; }
  size_t mixed_decode_offset() const { return f_.mixed_decode_offset; }
  size_t mixed_spec_offset() const { return f_.mixed_spec_offset; }
  size_t mixed_scratch_offset() const { return f_.mixed_scratch_offset; }
  size_t workspace_bytes() const { return f_.workspace_bytes; }
  int64_t work_units() const { return f_.work_units; }
  const std::string& note() const { return f_.note; }
  uint64_t seal() const { return f_.seal; }

 private:
  friend struct detail::PlanEditor;
  detail::PlanFields f_;
};

namespace detail {
// The planner's (and the tests') access to a plan's fields; callers read Plan's accessors.
struct PlanEditor {
  static PlanFields& fields(Plan& plan) { return plan.f_; }
  static const PlanFields& fields(const Plan& plan) { return plan.f_; }
};
}  // namespace detail

Status plan_decode(const DecodeProblem& problem, const DeviceInfo& device,
                   const PlanOptions& options, Plan* plan);
Status plan_prefill(const PrefillProblem& problem, const DeviceInfo& device,
                    const PlanOptions& options, Plan* plan);

// Multi-line human-readable description (the CLI's `splitkv plan`).
std::string describe(const Plan& plan);

}  // namespace splitkv
