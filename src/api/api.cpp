// Public entry points: validate -> find the plan's kernel -> fill its parameters -> launch.
// Nothing here allocates, synchronizes or reads device memory, so every call can be captured in a
// CUDA graph.
#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

#include "api/chunked_tensors.hpp"
#include "api/device_arch.hpp"
#include "api/kv_view.hpp"
#include "api/output_rows.hpp"
#include "api/side_stream.hpp"
#include "api/workspace_registry.hpp"
#include "common/block_table.hpp"
#include "common/formats.hpp"
#include "kernels/combine/atomic_normalize_params.hpp"
#include "kernels/combine/combine_params.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/decode/decode_params.hpp"
#include "kernels/mixed/mixed_route_params.hpp"
#include "kernels/prefill/prefill_params.hpp"
#include "kernels/prefill_sm90/tma_operands.hpp"
#include "kernels/quant/dequant_kv_params.hpp"
#include "kernels/tile_table.hpp"
#include "launch/dispatch.hpp"
#include "plan/geometry.hpp"
#include "plan/plan_seal.hpp"
#include "plan/workspace_layout.hpp"
#include "splitkv/splitkv.hpp"
#include "validate/validate.hpp"

namespace splitkv {
namespace {

// run_prefill, with a decode problem's tree mask when it serves one (run_decode_via_prefill).
Status run_prefill_with_tree(const Plan& plan, const PrefillTensors& t, void* workspace, size_t workspace_bytes,
                             Stream stream, const TensorRef& tree_mask);

using detail::OutputMode;
using detail::OutputParams;
using detail::final_output;

// Records the plan's use of its workspace (api/workspace_registry.hpp). A merge that keeps state
// there between calls (fused, atomic) needs it prepared for this plan with no other plan's call
// since: refused by name otherwise, instead of reading stale counters.
Status note_workspace_use(const Plan& plan, const void* workspace) {
  if (plan.workspace_bytes() == 0) return Status::success();
  const bool ready = detail::note_workspace_use(workspace, plan.seal());
  if (ready || !(plan.fused_combine() || plan.atomic_combine())) return Status::success();
  return Status::invalid("workspace",
                         "a workspace prepare_workspace(plan, ...) set up for this plan, with no other plan's call in "
                         "it since (the fused / atomic merge keeps counters there between calls)",
                         "one not prepared for this plan");
}

// The plan's family, which must be of the plan's kind.
Status plan_family(const Plan& plan, registry::Kind kind, int* family) {
  *family = registry::find_family(plan.family());
  if (*family < 0 || registry::families()[*family].kind != kind) {
    return Status::invalid("plan.family", std::string("a ") + registry::to_string(kind) + " kernel family",
                           "'" + plan.family() + "'");
  }
  return Status::success();
}

detail::LaunchConfig launch_config(Stream stream, const int (&grid)[3]) {
  detail::LaunchConfig config;
  for (int i = 0; i < 3; ++i) config.grid[i] = static_cast<unsigned>(grid[i]);
  config.stream = stream;
  config.use_pdl = detail::current_device_supports_pdl();
  return config;
}

// The decode kernel's launch: the plan's grid, and its shared memory per block where the plan holds
// each SM to an even share of the grid (Plan::launch_smem_bytes).
Status decode_launch_config(const Plan& plan, Stream stream, detail::LaunchConfig* config) {
  if (plan.launch_smem_bytes() < 0 || plan.launch_smem_bytes() > plan.device().smem_per_block_bytes) {
    return Status::invalid("plan.launch_smem_bytes",
                           "0 or at most the device's " + std::to_string(plan.device().smem_per_block_bytes) +
                               " bytes per block (as plan_decode sets it)",
                           std::to_string(plan.launch_smem_bytes()));
  }
  *config = launch_config(stream, plan.grid());
  config->min_smem_bytes = plan.launch_smem_bytes();
  config->register_bound_blocks = plan.register_bound_blocks();
  config->short_twin_warps = plan.short_twin_warps();
  config->persistent_blocks = plan.persistent_blocks();  // the stream kernel (PlanTuning::decode_stream)
  return Status::success();
}

// Split partials at partial_o / partial_lse; rows (b * seq_rows + i) * heads + h.
OutputParams partial_rows(float* partial_o, float* partial_lse, int64_t rows, int seq_rows, int heads) {
  OutputParams o{};
  o.mode = OutputMode::kPartial;
  o.partial_o = partial_o;
  o.partial_lse = partial_lse;
  o.partial_rows = rows;
  o.seq_rows = seq_rows;
  o.num_heads = heads;
  return o;
}

// Split partials in the workspace (plan/workspace_layout.hpp).
OutputParams partial_output(void* workspace, int num_splits, int64_t rows, int seq_rows, int heads, int head_dim) {
  const plan::SplitWorkspace ws = plan::split_workspace(num_splits, rows, head_dim);
  char* base = static_cast<char*>(workspace);
  return partial_rows(reinterpret_cast<float*>(base + ws.o_offset), reinterpret_cast<float*>(base + ws.lse_offset),
                      rows, seq_rows, heads);
}

// The fused combine's arrival counters in the workspace: one per (sequence, KV head, query tile),
// i.e. one per work unit of the decode plan.
int32_t* decode_tile_counters(const Plan& plan, void* workspace) {
  const plan::DecodeGeometry g = plan::decode_geometry(plan.decode(), plan.block_m());
  const plan::SplitWorkspace ws = plan::split_workspace(plan.num_splits(), g.out_rows, plan.decode().head_dim, g.work_units);
  return reinterpret_cast<int32_t*>(static_cast<char*>(workspace) + ws.counters_offset);
}

// The atomic combine's fp32 accumulators in a decode plan's workspace, after the partials (the
// fallback path's): the O rows, then the row sums; `bytes` covers both (what a replay zeroes).
struct AtomicAccumulators {
  float* o;
  float* sum;
  size_t bytes;
};
AtomicAccumulators decode_atomic_accumulators(const Plan& plan, void* workspace) {
  const plan::DecodeGeometry g = plan::decode_geometry(plan.decode(), plan.block_m());
  const plan::AtomicCombineWorkspace ws = plan::atomic_combine_workspace(plan.num_splits(), g.out_rows, plan.decode().head_dim);
  char* base = static_cast<char*>(workspace);
  return {reinterpret_cast<float*>(base + ws.o_offset), reinterpret_cast<float*>(base + ws.sum_offset),
          ws.total_bytes - ws.o_offset};
}


// A prefill plan's stream-K workspace: a slot per block boundary, from where the planner put it.
plan::StreamKWorkspace stream_k_workspace_of(const Plan& plan) {
  return plan::stream_k_workspace(plan.stream_k_workspace_offset(), plan.persistent_blocks() - 1, plan.block_m(),
                                  plan.prefill().head_dim);
}

// The combine of the partials `from` into the final rows `to`.
detail::CombineParams combine_params(const OutputParams& from, int num_splits, const OutputParams& to,
                                     const int32_t* cu_seqlens_q, int64_t total_q = 0) {
  detail::CombineParams c{};
  c.partial_o = from.partial_o;
  c.partial_lse = from.partial_lse;
  c.rows = from.partial_rows;
  c.num_splits = num_splits;
  c.num_q_heads = from.num_heads;
  c.seq_rows = from.seq_rows;
  c.cu_seqlens_q = cu_seqlens_q;
  c.total_q = total_q;
  c.output = to;
  return c;
}

// Merges the partials `from` into the final rows `to` with the combine family's kernel.
// sinks: the per-head sink logits folded into every merged row (empty: none).
Status launch_combine(const OutputParams& from, int num_splits, const OutputParams& to, const int32_t* cu_seqlens_q,
                      int64_t total_q, DType dtype, int head_dim, Stream stream, bool caller_partials = false,
                      const TensorRef& sinks = TensorRef{}) {
  detail::Launcher launcher;
  if (Status s = detail::find_launcher("combine", dtype, head_dim, &launcher); !s) return s;
  detail::CombineParams c = combine_params(from, num_splits, to, cu_seqlens_q, total_q);
  c.caller_partials = caller_partials;
  if (!sinks.empty()) {
    c.sinks = static_cast<const float*>(sinks.data);
    c.sinks_stride = sinks.stride[0];
  }
  c.split_groups = tiles::combine_split_groups(num_splits, head_dim);
  // Teams: a block per row (combine_teams_kernel).
  const int64_t rows_per_block = c.split_groups > 1 ? 1 : tiles::combine_rows_per_block(head_dim);
  const int grid[3] = {static_cast<int>((from.partial_rows + rows_per_block - 1) / rows_per_block), 1, 1};
  return detail::launch(launcher, &c, launch_config(stream, grid), "combine kernel launch");
}

// A decode plan served by chunked prefill (Plan::decode_via_prefill): the decode tensors are the
// padded chunked-prefill tensors of the same cache (q, out [B, q_len, Hq, D]; lse [B, Hq, q_len]).
// The window, the softcap, sinks and the tree mask go with the problem (the prefill kernels' variants
// instances); context shards the prefill kernels do not take: refused by name.
Status run_decode_via_prefill(const Plan& plan, const DecodeTensors& t, void* workspace, size_t workspace_bytes,
                              Stream stream) {
  const DecodeProblem& pr = plan.decode();
  // Tree masks: the GQA-packed tiles' variants instances, over at most kMaxPrefillTreeDrafts drafts.
  if (pr.tree_mask && plan.packed_queries() == 0) {
    return Status::unsupported("tree_mask", "served on chunked prefill by the GQA-packed families (prefill_sm90_gqa, "
                                            "prefill_sm90_gqa64) only; this plan runs " +
                                                plan.family() + " (name one of them, or a decode family, in options.family)");
  }
  if (pr.tree_mask && pr.q_len > detail::kMaxPrefillTreeDrafts) {
    return Status::unsupported("tree_mask", "at most " + std::to_string(detail::kMaxPrefillTreeDrafts) +
                                                " drafts (q_len) on this plan, which runs chunked prefill (" +
                                                plan.family() + "); got q_len " + std::to_string(pr.q_len) +
                                                " (name a decode family in options.family)");
  }
  const std::string why = "empty: this plan serves decode by chunked prefill (" + plan.family() +
                          "), which takes no context shard; plan with options.prefill_route = false and without a prefill "
                          "options.family";
  if (!t.keys_after.empty()) return Status::unsupported("keys_after", why);
  if (!t.partial_o.empty() || !t.partial_lse.empty()) return Status::unsupported("partial_o", why);
  PrefillTensors p;
  p.q = t.q;
  p.out = t.out;
  p.lse = t.lse;
  detail::bind_decode_cache(t, &p);
  p.sinks = t.sinks;
  // validate_decode_tensors has checked the host copies of lengths and page ids already.
  p.seq_lens_host = nullptr;
  p.block_table_host = nullptr;
  Plan prefill = plan;
  detail::PlanFields& as_prefill = detail::PlanEditor::fields(prefill);
  as_prefill.kind = PlanKind::kPrefill;
  as_prefill.decode_via_prefill = false;
  as_prefill.seal = detail::plan_seal(prefill);  // the same plan, seen as the prefill it is
  return run_prefill_with_tree(prefill, p, workspace, workspace_bytes, stream,
                                       pr.tree_mask ? t.tree_mask : TensorRef{});
}

}  // namespace

namespace {

// The decode kernel over keys per channel (*_kc) copies each group's (scale, min) row with
// cp.async (D / 8 bytes per lane: 16-byte aligned rows, 8 at D = 64; validation asks only 2); the
// tail ring's 4-byte reads are covered by validation's 16-byte rows. It serves no context shard
// (the groups are a whole sequence's).
Status check_channel_keys_decode(const DecodeProblem& pr, const DecodeTensors& t) {
  if (!t.keys_after.empty()) {
    return Status::unsupported("keys_after", "the decode kernel over keys per channel serves no context shard");
  }
  const int64_t align = pr.head_dim == 64 ? 8 : 16;
  const auto aligned = [](const void* data, int64_t bytes) { return reinterpret_cast<uintptr_t>(data) % bytes == 0; };
  const int64_t element = 2;  // fp16 scales, 16-bit tail
  bool scales_ok = aligned(t.k_scales.data, align);
  for (int d = 0; d < 3; ++d) scales_ok = scales_ok && (t.k_scales.stride[d] * element) % align == 0;
  if (!scales_ok) {
    return Status::invalid("k_scales", "group rows aligned to " + std::to_string(align) +
                                           " bytes (data pointer and strides) for the decode kernel", "a misaligned tensor");
  }
  return Status::success();
}

}  // namespace

Status run_decode(const Plan& plan, const DecodeTensors& t, void* workspace, size_t workspace_bytes, Stream stream) {
  if (plan.kind() != Plan::Kind::kDecode) return Status::invalid("plan", "a decode plan", "a prefill plan");
  if (Status s = detail::check_plan_seal(plan); !s) return s;
  const DecodeProblem& pr = plan.decode();
  if (Status s = detail::validate_decode_problem(pr); !s) return s;
  if (Status s = detail::validate_decode_tensors(pr, t); !s) return s;
  // The variants: by the decode kernels' variants instances (sinks folded by the combine kernel
  // after several splits, by a single split's decode kernel otherwise), or on a chunked-prefill
  // plan the softcap, the window, sinks and (GQA-packed tiles) the tree mask by the prefill
  // kernels' (run_decode_via_prefill).
  // Served by chunked prefill, any cache format is read through its dequantized copy.
  if (plan.decode_via_prefill()) return run_decode_via_prefill(plan, t, workspace, workspace_bytes, stream);
  const KvFormat kv_format = detail::resolve_kv_format(pr.kv_format, pr.dtype);  // kAuto resolved, once
  if (detail::kv_format_traits(kv_format).channel_keys) {
    if (Status s = check_channel_keys_decode(pr, t); !s) return s;
  }
  if (Status s = detail::validate_decode_partials(pr, plan.num_splits(), t); !s) return s;
  // The caller's partial buffers replace the workspace's (and the combine).
  const bool caller_partials = !t.partial_o.empty();
  if (!caller_partials) {
    if (Status s = detail::validate_workspace(plan.workspace_bytes(), workspace, workspace_bytes); !s) return s;
    if (Status s = note_workspace_use(plan, workspace); !s) return s;
  }
  int family = -1;
  if (Status s = plan_family(plan, registry::Kind::kDecode, &family); !s) return s;
  detail::Launcher launcher;
  if (Status s = detail::find_launcher(family, pr.dtype, pr.head_dim, pr.kv_format, &launcher); !s) return s;
  const plan::DecodeGeometry g = plan::decode_geometry(pr, plan.block_m());

  detail::DecodeParams p{};
  p.q = t.q.data;
  p.q_batch_stride = t.q.stride[0];
  p.q_token_stride = t.q.stride[1];
  p.q_head_stride = t.q.stride[2];
  p.kv = detail::cache_view(t, kv_format, pr.page_size);
  p.keys_after = static_cast<const int32_t*>(t.keys_after.data);
  // Lengths past max_kv_len are invalid input on every route (NaN in that sequence): the plan's
  // splits, workspace and staging copy are sized for max_kv_len (validation keeps it <= capacity).
  p.max_kv_len = pr.max_kv_len;
  p.batch = pr.batch;
  p.num_q_heads = pr.num_q_heads;
  p.num_kv_heads = pr.num_kv_heads;
  p.q_len = pr.q_len;
  p.group = detail::FastDivmod::make(g.group);
  p.rows_per_kv = g.rows_per_kv;
  p.m_tiles = detail::FastDivmod::make(g.m_tiles);
  p.num_splits = detail::FastDivmod::make(plan.num_splits());
  p.split_tokens = plan.split_tokens();
  p.cluster_combine = plan.cluster_combine() && !caller_partials;
  p.causal = pr.causal;
  p.scale_log2 = g.scale_log2;
  p.softcap = pr.softcap;
  p.window_left = pr.window_left;
  p.window_right = pr.window_right;
  if (pr.tree_mask) {  // uint8 [B, q_len, ceil(q_len / 8)]
    p.tree_mask = static_cast<const uint8_t*>(t.tree_mask.data);
    p.tree_mask_batch_stride = t.tree_mask.stride[0];
    p.tree_mask_query_stride = t.tree_mask.stride[1];
  }
  p.l2_prefetch = plan.l2_prefetch();
  p.l2_prefetch_keys = plan.l2_prefetch_keys();  // read only with l2_prefetch

  if (caller_partials) {
    p.output = partial_rows(static_cast<float*>(t.partial_o.data), static_cast<float*>(t.partial_lse.data),
                            g.out_rows, pr.q_len, pr.num_q_heads);
    detail::LaunchConfig config;
    if (Status s = decode_launch_config(plan, stream, &config); !s) return s;
    return detail::launch(launcher, &p, config, "decode kernel launch");
  }
  const OutputParams final_rows = final_output(t.out, t.lse, false);
  // In the workspace. Sinks: the combine kernel folds them after merging several splits; a single
  // split's kernel folds them into its final rows, a cluster's merge into the merged rows.
  const bool merge_partials = plan.num_splits() > 1 && !plan.cluster_combine();
  if (pr.sinks && (plan.fused_combine() || plan.atomic_combine())) {
    return Status::invalid("plan", "a plan whose splits the combine kernel merges (sinks)", "another merge");
  }
  if (pr.sinks && !merge_partials) {
    p.sinks = static_cast<const float*>(t.sinks.data);
    p.sinks_stride = t.sinks.stride[0];
  }
  p.output = merge_partials ? partial_output(workspace, plan.num_splits(), g.out_rows, pr.q_len, pr.num_q_heads,
                                             pr.head_dim)
                            : final_rows;
  if (merge_partials && plan.fused_combine()) {  // each tile's last split block merges; no combine launch
    p.tile_counters = decode_tile_counters(plan, workspace);
    p.combined = final_rows;
  }
  detail::AtomicNormalizeParams atomic{};
  if (merge_partials && plan.atomic_combine()) {  // adds into fp32 rows; the partials are the fallback
    const AtomicAccumulators acc = decode_atomic_accumulators(plan, workspace);
    p.output.mode = OutputMode::kAtomic;
    p.output.atomic_o = acc.o;
    p.output.atomic_sum = acc.sum;
    p.output.reference_lse = plan.atomic_reference_lse();
    atomic.combine = combine_params(p.output, plan.num_splits(), final_rows, nullptr);
    atomic.atomic_o = p.output.atomic_o;
    atomic.atomic_sum = p.output.atomic_sum;
    atomic.reference_lse = plan.atomic_reference_lse();
  }
  const bool combine_after = merge_partials && !plan.fused_combine() && !plan.atomic_combine();
  detail::LaunchConfig config;
  if (Status s = decode_launch_config(plan, stream, &config); !s) return s;
  if (plan.cluster_combine()) {
    if (!config.use_pdl) {  // clusters exist from sm_90 on, like PDL
      return Status::unsupported("plan.cluster_combine", "needs an sm_90 device; plan with this device's DeviceInfo");
    }
    config.cluster_blocks = plan.num_splits();
  }
  if (Status s = detail::launch(launcher, &p, config, "decode kernel launch"); !s) return s;
  if (merge_partials && plan.atomic_combine()) {
    detail::Launcher normalize_launcher;
    if (Status s = detail::find_launcher("atomic_normalize", pr.dtype, pr.head_dim, &normalize_launcher); !s) return s;
    const cudaError_t error = normalize_launcher(&atomic, launch_config(stream, plan.grid()));
    if (error == cudaSuccess) return Status::success();
    return Status(StatusCode::kCudaError, "plan.atomic_combine",
                  std::string("atomic combine normalization launch: ") + cudaGetErrorString(error));
  }
  if (!combine_after) return Status::success();
  return launch_combine(p.output, plan.num_splits(), final_rows, nullptr, 0, pr.dtype, pr.head_dim, stream, false,
                        pr.sinks ? t.sinks : TensorRef{});
}

Status prepare_workspace(const Plan& plan, void* workspace, size_t workspace_bytes, Stream stream) {
  const bool decode_splits = plan.kind() == Plan::Kind::kDecode && plan.num_splits() > 1;
  if (Status s = detail::check_plan_seal(plan); !s) return s;
  if (!(decode_splits && (plan.fused_combine() || plan.atomic_combine()))) return Status::success();
  if (Status s = detail::validate_workspace(plan.workspace_bytes(), workspace, workspace_bytes); !s) return s;
  void* start = nullptr;
  size_t bytes = 0;
  if (plan.fused_combine()) {  // the arrival counters
    start = decode_tile_counters(plan, workspace);
    bytes = size_t(plan.work_units()) * sizeof(int32_t);
  } else {  // the atomic combine's accumulators
    const AtomicAccumulators acc = decode_atomic_accumulators(plan, workspace);
    start = acc.o;
    bytes = acc.bytes;
  }
  const cudaError_t error = cudaMemsetAsync(start, 0, bytes, stream);
  if (error == cudaSuccess) {
    detail::note_workspace_prepared(workspace, plan.seal());
    return Status::success();
  }
  return Status(StatusCode::kCudaError, "workspace",
                std::string("prepare_workspace: zeroing the merge's counters or accumulators: ") + cudaGetErrorString(error));
}

namespace {

// The sm_90a prefill families load Q, K and V by TMA, whose descriptors take strides > 0, multiples
// of 16 bytes and below 2^40 bytes on every dimension longer than 1 (kernels/prefill_sm90/tma_operands.hpp).
// Validation accepts any non-negative stride (the mma.sync families read through plain pointers),
// so a stride TMA cannot take is refused here by name, before anything is encoded or launched.
Status check_tma_views(const detail::PrefillParams& p, int head_dim, const std::string& family,
                       const PrefillTensors& t) {
  struct Operand {
    const char* name;
    detail::TmaOperand which;
    const TensorRef* tensor;
  };
  const Operand operands[] = {{"q", detail::TmaOperand::kQ, &t.q},
                              {"k", detail::TmaOperand::kK, &t.k},
                              {"v", detail::TmaOperand::kV, &t.v}};
  for (const Operand& o : operands) {
    const bool paged = o.which != detail::TmaOperand::kQ && p.kv.block_table != nullptr;
    const detail::TmaView view =
        paged ? detail::tma_page_view(p, o.which, head_dim) : detail::tma_token_view(p, o.which, head_dim);
    const int dim = detail::first_untmaable_dim(view, detail::element_traits(o.tensor->dtype).bits / 8);
    if (dim < 0) continue;
    const int tensor_dim = view.tensor_dim[dim];
    const std::string argument =
        std::string(o.name) + (tensor_dim >= 0 ? ".stride[" + std::to_string(tensor_dim) + "]" : ".shape[0]");
    return Status::unsupported(
        argument, "a stride the TMA loads of family " + family +
                      " can take (> 0, a multiple of 16 bytes, below 2^40 bytes on a dimension longer than 1), got " +
                      std::to_string(view.stride[dim]) +
                      " elements; plan with options.family = \"prefill_mma\" (plain loads take any stride)");
  }
  return Status::success();
}

// What the library's own routes hand a prefill launch beside the caller's tensors: a decode
// problem's tree mask (run_decode_via_prefill), the mixed route's sequences served elsewhere
// (int32 [batch], PrefillParams::skip_sequences). Empty for run_prefill's callers.
struct PrefillExtras {
  TensorRef tree_mask;
  const int32_t* skip_sequences = nullptr;
  const int32_t* active_blocks = nullptr;  // PrefillParams::active_blocks (the mixed route)
};

// The prefill kernel (and the combine after split-KV) over validated tensors.
Status launch_prefill(const Plan& plan, const PrefillTensors& t, void* workspace, Stream stream,
                      const PrefillExtras& extras) {
  const TensorRef& tree_mask = extras.tree_mask;
  const PrefillProblem& pr = plan.prefill();
  int family = -1;
  if (Status s = plan_family(plan, registry::Kind::kPrefill, &family); !s) return s;
  detail::Launcher launcher;
  if (Status s = detail::find_launcher(family, pr.dtype, pr.head_dim, pr.kv_format, &launcher); !s) return s;
  const plan::PrefillGeometry g = plan::prefill_geometry(pr, plan.block_m(), plan.packed_queries());

  // Padded tensors are [B, L, H, D]; varlen ones [total, H, D] with the batch folded into tokens.
  // A KV cache keeps its batch (or page) dimension whether the queries are varlen or not.
  auto strides = [&](const TensorRef& x, bool folded, int64_t* batch, int64_t* token, int64_t* head) {
    const int token_dim = folded ? 0 : 1;
    *batch = folded ? 0 : x.stride[0];
    *token = x.stride[token_dim];
    *head = x.stride[token_dim + 1];
  };
  detail::PrefillParams p{};
  p.q = t.q.data;
  strides(t.q, pr.varlen, &p.q_batch_stride, &p.q_token_stride, &p.q_head_stride);
  // K/V: a decode cache (chunked prefill; 16-bit here, a quantized one was staged) or token tensors.
  const bool kv_folded = pr.varlen && !pr.kv_cache;
  if (pr.kv_cache) {
    p.kv = detail::cache_view(t, detail::resolve_kv_format(pr.kv_format, pr.dtype), pr.page_size);
  } else {
    p.kv.k = detail::token_side(t.k, kv_folded);
    p.kv.v = detail::token_side(t.v, kv_folded);
  }
  if (pr.varlen) {
    p.cu_seqlens_q = static_cast<const int32_t*>(t.cu_seqlens_q.data);
    p.total_q = t.q.shape[0];
  }
  if (kv_folded) {
    p.cu_seqlens_k = static_cast<const int32_t*>(t.cu_seqlens_k.data);
    p.total_k = t.k.shape[0];
  }
  p.batch = pr.batch;
  p.num_q_heads = pr.num_q_heads;
  p.num_kv_heads = pr.num_kv_heads;
  p.group = g.group;
  p.max_q_len = pr.max_q_len;
  p.max_kv_len = pr.max_kv_len;
  p.causal = pr.causal;
  p.scale_log2 = g.scale_log2;
  p.softcap = pr.softcap;
  p.window_left = pr.window_left;
  p.window_right = pr.window_right;
  if (!tree_mask.empty()) {  // uint8 [B, q_len, ceil(q_len / 8)], validated as the decode problem's
    p.causal = false;  // the bits replace the causal rule among the drafts; every other key is visible
    p.tree_mask = static_cast<const uint8_t*>(tree_mask.data);
    p.tree_mask_batch_stride = tree_mask.stride[0];
    p.tree_mask_query_stride = tree_mask.stride[1];
  }
  p.skip_sequences = extras.skip_sequences;
  p.active_blocks = extras.active_blocks;
  if (pr.sinks) {  // folded by the kernel into final rows, by the combine after KV splits
    p.sinks = static_cast<const float*>(t.sinks.data);
    p.sinks_stride = t.sinks.stride[0];
  }
  p.num_splits = plan.num_splits();

  if (registry::families()[family].arch == registry::Arch::kSm90a) {
    if (Status s = check_tma_views(p, pr.head_dim, plan.family(), t); !s) return s;
  }
  const OutputParams final_rows = final_output(t.out, t.lse, pr.varlen);
  p.output = final_rows;
  if (plan.strategy() == Strategy::kTwoPass) {
    const plan::TwoPassWorkspace ws = plan::two_pass_workspace(g.out_rows);
    char* base = static_cast<char*>(workspace);
    p.row_max = reinterpret_cast<float*>(base + ws.max_offset);
    p.row_sum = reinterpret_cast<float*>(base + ws.sum_offset);
  } else if (plan.num_splits() > 1) {
    p.output = partial_output(workspace, plan.num_splits(), g.out_rows, pr.max_q_len, pr.num_q_heads, pr.head_dim);
  }
  detail::LaunchConfig config = launch_config(stream, plan.grid());
  config.persistent_blocks = plan.persistent_blocks();
  if (plan.dynamic_tiles()) {
    p.tile_counter = reinterpret_cast<int32_t*>(static_cast<char*>(workspace) +
                                                plan::tile_counter_offset(plan.workspace_bytes()));
    if (const cudaError_t e = cudaMemsetAsync(p.tile_counter, 0, sizeof(int32_t), stream); e != cudaSuccess) {
      return Status(StatusCode::kCudaError, "workspace",
                    std::string("zeroing the prefill's tile counter: ") + cudaGetErrorString(e));
    }
  }
  if (plan.stream_k()) {
    const plan::StreamKWorkspace ws = stream_k_workspace_of(plan);
    char* base = static_cast<char*>(workspace);
    p.stream_steps = plan.stream_k_steps();  // the launcher checks it against its kernel's K tile
    p.stream_first_tile = plan.stream_k_first_tile();
    p.stream_o = reinterpret_cast<float*>(base + ws.o_offset);
    p.stream_lse = reinterpret_cast<float*>(base + ws.lse_offset);
    p.stream_counters = reinterpret_cast<int32_t*>(base + ws.counters_offset);
    if (const cudaError_t e = cudaMemsetAsync(p.stream_counters, 0, ws.counters_bytes, stream); e != cudaSuccess) {
      return Status(StatusCode::kCudaError, "workspace",
                    std::string("zeroing the prefill's stream-K counters: ") + cudaGetErrorString(e));
    }
  }
  if (Status s = detail::launch(launcher, &p, config, "prefill kernel launch"); !s) return s;
  if (p.output.mode != OutputMode::kPartial) return Status::success();
  return launch_combine(p.output, plan.num_splits(), final_rows, p.cu_seqlens_q, p.total_q, pr.dtype, pr.head_dim, stream,
                        /*caller_partials=*/false, pr.sinks ? t.sinks : TensorRef{});
}

// Chunked prefill over a quantized cache: the cache's tokens dequantized into the staging copy at
// the start of the workspace, then the plan's family reads the copy as a contiguous 16-bit cache
// with the rest of the workspace as its own.
Status prefill_over_staging(const Plan& plan, const PrefillTensors& t, void* workspace, Stream stream,
                            const PrefillExtras& extras) {
  const PrefillProblem& pr = plan.prefill();
  const plan::KvStaging st = plan::kv_staging(pr.batch, pr.max_kv_len, pr.num_kv_heads, pr.head_dim);
  char* base = static_cast<char*>(workspace);
  detail::DequantKvParams d;
  const KvFormat kv_format = detail::resolve_kv_format(pr.kv_format, pr.dtype);
  d.kv = detail::cache_view(t, kv_format, pr.page_size);
  const detail::KvFormatTraits format = detail::kv_format_traits(kv_format);
  d.k_codes = format.k_codes();
  d.v_codes = format.v_codes();
  d.channel_keys = format.channel_keys;  // d.kv.k_scales: the keys' group scales
  d.batch = pr.batch;
  d.num_kv_heads = pr.num_kv_heads;
  d.head_dim = pr.head_dim;
  d.max_kv_len = pr.max_kv_len;
  d.dtype = pr.dtype;
  d.k_out = base + st.k_offset;
  d.v_out = base + st.v_offset;
  d.staging_tokens = st.tokens;
  d.lens_out = reinterpret_cast<int32_t*>(base + st.lens_offset);
  detail::Launcher dequant_launcher;
  if (Status s = detail::find_launcher("dequant_kv", pr.dtype, pr.head_dim, &dequant_launcher); !s) return s;
  const cudaError_t error = dequant_launcher(&d, launch_config(stream, plan.grid()));
  if (error != cudaSuccess) {
    return Status(StatusCode::kCudaError, "kv_format",
                  std::string("dequantizing the KV cache: ") + cudaGetErrorString(error));
  }

  Plan inner = plan;
  detail::PlanFields& staged_plan = detail::PlanEditor::fields(inner);
  staged_plan.dequantized_cache = false;
  staged_plan.staging_bytes = 0;
  staged_plan.workspace_bytes = plan.workspace_bytes() - st.total_bytes;
  staged_plan.prefill.kv_format = KvFormat::kNative;
  staged_plan.prefill.page_size = 0;
  const int64_t B = pr.batch, Hkv = pr.num_kv_heads, D = pr.head_dim;
  PrefillTensors staged = t;
  staged.k = TensorRef::contiguous(d.k_out, pr.dtype, {B, st.tokens, Hkv, D});
  staged.v = TensorRef::contiguous(d.v_out, pr.dtype, {B, st.tokens, Hkv, D});
  staged.k_scales = TensorRef{};
  staged.v_scales = TensorRef{};
  staged.seq_lens = TensorRef::contiguous(d.lens_out, DType::kI32, {B});
  staged.block_table = TensorRef{};
  staged.seq_lens_host = nullptr;
  staged.block_table_host = nullptr;
  return launch_prefill(inner, staged, base + st.total_bytes, stream, extras);
}

// The mixed route (Plan::mixed_route, docs/MIXED_BATCH.md) over validated tensors: the split
// kernel gives each decode row a slot in its part (members first) and writes every part's lengths,
// block table and padded queries; the prefill part runs on
// the (high-priority) side stream, so that its blocks take their SMs first, beside the decode parts
// on the caller's; after the join the merge kernel copies the decode rows' outputs into the call's
// rows (which the prefill part wrote as rows with no keys).
Status run_mixed_route(const Plan& plan, const PrefillTensors& t, void* workspace, Stream stream) {
  const PrefillProblem& pr = plan.prefill();
  const int64_t B = pr.batch, Hq = pr.num_q_heads, D = pr.head_dim;
  char* base = static_cast<char*>(workspace);
  char* scratch = base + plan.mixed_scratch_offset();
  const int table_pages = int(detail::block_table_pages(pr.max_kv_len, pr.page_size));
  const plan::MixedScratch sc =
      plan::mixed_scratch(pr.batch, plan.mixed_decode_q(), pr.num_q_heads, pr.head_dim, table_pages);
  static_assert(std::extent_v<decltype(plan::MixedScratch::parts)> == detail::kMixedDecodeParts);
  const Plan* part_plans[detail::kMixedDecodeParts] = {plan.mixed_decode_plan(), plan.mixed_spec_plan()};
  const size_t part_workspace[detail::kMixedDecodeParts] = {plan.mixed_decode_offset(), plan.mixed_spec_offset()};
  detail::Launcher launcher;
  if (Status s = detail::find_launcher("mixed_route", pr.dtype, pr.head_dim, &launcher); !s) return s;

  detail::MixedRouteParams m;
  m.cu_seqlens_q = static_cast<const int32_t*>(t.cu_seqlens_q.data);
  m.seq_lens = static_cast<const int32_t*>(t.seq_lens.data);
  m.batch = pr.batch, m.num_q_heads = pr.num_q_heads, m.head_dim = pr.head_dim;
  m.total_q = t.q.shape[0];
  m.max_kv_len = pr.max_kv_len;
  m.q = t.q.data, m.q_token_stride = t.q.stride[0], m.q_head_stride = t.q.stride[1];
  m.out = t.out.data, m.o_token_stride = t.out.stride[0], m.o_head_stride = t.out.stride[1];
  if (!t.lse.empty()) {  // [Hq, total_q]
    m.lse = static_cast<float*>(t.lse.data), m.lse_head_stride = t.lse.stride[0], m.lse_token_stride = t.lse.stride[1];
  }
  m.block_table = static_cast<const int32_t*>(t.block_table.data);
  m.block_table_stride = t.block_table.stride[0];
  m.page_size = pr.page_size, m.table_pages = table_pages;
  for (int k = 0; k < detail::kMixedDecodeParts; ++k) {
    const plan::MixedScratchPart& at = sc.parts[k];
    if (part_plans[k] == nullptr || at.width == 0) continue;
    detail::MixedDecodePart& d = m.parts[k];
    d.q_min = k == 0 ? 1 : sc.parts[k - 1].width + 1;  // the parts split 1..mixed_decode_q in order
    d.q_max = at.width;
    d.q = scratch + at.q_offset;
    d.out = scratch + at.out_offset;
    d.lse = reinterpret_cast<const float*>(scratch + at.lse_offset);
    d.seq_lens = reinterpret_cast<int32_t*>(scratch + at.lens_offset);
    d.block_table = reinterpret_cast<int32_t*>(scratch + at.table_offset);
  }
  m.slots = reinterpret_cast<int32_t*>(scratch + sc.slots_offset);
  m.prefill_seq_lens = reinterpret_cast<int32_t*>(scratch + sc.prefill_lens_offset);
  m.prefill_skip = reinterpret_cast<int32_t*>(scratch + sc.prefill_skip_offset);
  if (plan.mixed_beside_blocks() > 0) {  // side by side on a persistent grid: its share set per step
    m.prefill_blocks = reinterpret_cast<int32_t*>(scratch + sc.prefill_blocks_offset);
    m.prefill_blocks_beside = plan.mixed_beside_blocks();
    m.prefill_blocks_alone = plan.persistent_blocks();
  }
  const int one[3] = {1, 1, 1};  // the launcher sets the grid (a block per sequence)
  m.stage = detail::MixedRouteStage::kSplit;
  if (Status s = detail::launch(launcher, &m, launch_config(stream, one), "mixed route split launch"); !s) return s;

  // The prefill part: every sequence no decode part serves (the others skipped: no tile of them
  // runs; at length 0 for the staging copy), launched first: on the side stream, or on the
  // caller's ahead of the decode parts where the plan runs the parts one after the other.
  detail::SideStream side;
  if (!plan.mixed_serial()) {
    if (Status s = detail::fork_side_stream(stream, &side); !s) return s;
  }
  const Stream prefill_stream = plan.mixed_serial() ? stream : side.stream;
  PrefillTensors pt = t;
  pt.seq_lens = TensorRef::contiguous(m.prefill_seq_lens, DType::kI32, {B});
  pt.seq_lens_host = nullptr;
  pt.block_table_host = nullptr;
  Plan prefill = plan;
  detail::PlanFields& own = detail::PlanEditor::fields(prefill);
  own.mixed_decode = own.mixed_spec = nullptr;
  own.mixed_decode_q = 0;
  own.mixed_serial = false;
  own.mixed_beside_blocks = 0;
  own.workspace_bytes = plan.mixed_decode_offset();  // its own part of the workspace, first
  own.mixed_decode_offset = own.mixed_spec_offset = own.mixed_scratch_offset = 0;
  own.seal = detail::plan_seal(prefill);
  PrefillExtras skip;  // the decode rows: no tile of them runs here (the merge writes their rows)
  skip.skip_sequences = m.prefill_skip;
  skip.active_blocks = m.prefill_blocks;
  const Status ran = prefill.dequantized_cache() ? prefill_over_staging(prefill, pt, workspace, prefill_stream, skip)
                                                 : launch_prefill(prefill, pt, workspace, prefill_stream, skip);

  // The decode parts: each part's padded rows over the same cache, on the caller's stream.
  Status decoded = Status::success();
  for (int k = 0; k < detail::kMixedDecodeParts && ran && decoded; ++k) {
    const detail::MixedDecodePart& d = m.parts[k];
    if (d.q_max == 0) continue;
    DecodeTensors dt;
    detail::bind_prefill_cache(t, &dt);
    dt.q = TensorRef::contiguous(d.q, pr.dtype, {B, d.q_max, Hq, D});
    dt.seq_lens = TensorRef::contiguous(d.seq_lens, DType::kI32, {B});
    dt.block_table = TensorRef::contiguous(d.block_table, DType::kI32, {B, table_pages});
    dt.out = TensorRef::contiguous(const_cast<void*>(d.out), pr.dtype, {B, d.q_max, Hq, D});
    dt.lse = TensorRef::contiguous(const_cast<float*>(d.lse), DType::kF32, {B, Hq, d.q_max});
    if (pr.sinks) dt.sinks = t.sinks;
    decoded = run_decode(*part_plans[k], dt, base + part_workspace[k], part_plans[k]->workspace_bytes(), stream);
  }
  if (!plan.mixed_serial()) {
    if (Status s = detail::join_side_stream(stream, side); !s) return s;
  }
  if (!ran) return ran;
  if (!decoded) return decoded;
  m.stage = detail::MixedRouteStage::kMerge;
  return detail::launch(launcher, &m, launch_config(stream, one), "mixed route merge launch");
}

Status run_prefill_with_tree(const Plan& plan, const PrefillTensors& t, void* workspace, size_t workspace_bytes,
                             Stream stream, const TensorRef& tree_mask) {
  if (plan.kind() != Plan::Kind::kPrefill) return Status::invalid("plan", "a prefill plan", "a decode plan");
  if (Status s = detail::check_plan_seal(plan); !s) return s;
  const PrefillProblem& pr = plan.prefill();
  if (Status s = detail::validate_prefill_problem(pr); !s) return s;
  if (Status s = detail::validate_prefill_tensors(pr, t); !s) return s;
  // The softcap, the window and sinks: the one-pass prefill kernels' variants instances.
  // Chunked prefill reads any cache through its dequantized copy; *_kc caches only that way.
  if (!plan.dequantized_cache() &&
      detail::kv_format_traits(detail::resolve_kv_format(pr.kv_format, pr.dtype)).channel_keys) {
    return Status::unsupported("kv_format", "the prefill kernels read keys per channel only through the dequantized "
                                            "copy of a cache");
  }
  if (Status s = detail::validate_workspace(plan.workspace_bytes(), workspace, workspace_bytes); !s) return s;
  if (Status s = note_workspace_use(plan, workspace); !s) return s;
  if (plan.mixed_route()) {
    if (!tree_mask.empty()) return Status::unsupported("tree_mask", "not on a mixed-route plan");
    return run_mixed_route(plan, t, workspace, stream);
  }
  PrefillExtras extras;
  extras.tree_mask = tree_mask;
  if (plan.dequantized_cache()) return prefill_over_staging(plan, t, workspace, stream, extras);
  return launch_prefill(plan, t, workspace, stream, extras);
}

}  // namespace

Status run_prefill(const Plan& plan, const PrefillTensors& t, void* workspace, size_t workspace_bytes,
                   Stream stream) {
  return run_prefill_with_tree(plan, t, workspace, workspace_bytes, stream, TensorRef{});
}

Status run_combine(const CombineProblem& pr, const CombineTensors& t, Stream stream) {
  if (Status s = detail::validate_combine(pr, t); !s) return s;
  OutputParams partials{};
  partials.mode = OutputMode::kPartial;
  partials.partial_o = static_cast<float*>(t.partial_o.data);
  partials.partial_lse = static_cast<float*>(t.partial_lse.data);
  partials.partial_rows = int64_t(pr.batch) * pr.seq_len * pr.num_heads;
  partials.seq_rows = pr.seq_len;
  partials.num_heads = pr.num_heads;
  return launch_combine(partials, pr.num_splits, final_output(t.out, t.lse, false), nullptr, 0, pr.dtype,
                        pr.head_dim, stream, /*caller_partials=*/true, pr.sinks ? t.sinks : TensorRef{});
}

}  // namespace splitkv
