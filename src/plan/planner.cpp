// The planner: problem shape + device description -> Plan. Pure host code, no CUDA calls.
#include <algorithm>
#include <cmath>
#include <string>

#include "api/validate.hpp"
#include "kernels/tile_table.hpp"
#include "plan/plan_kernels.hpp"
#include "plan/split_heuristic.hpp"
#include "plan/workspace_layout.hpp"
#include "splitkv/plan.hpp"

namespace splitkv {
namespace {

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

int blocks_per_sm(const DeviceInfo& device, int smem_bytes, int threads) {
  // 1 KB of shared memory per block is reserved by the runtime on sm_80+.
  const int by_smem = device.smem_per_sm_bytes / (smem_bytes + 1024);
  const int by_threads = 2048 / threads;
  return std::max(1, std::min(by_smem, by_threads));
}

// Resolves options.num_splits / max_splits / split_tokens / auto into a split count.
struct SplitDecision {
  int num_splits = 1;
  int split_tokens = 0;
  std::string note;
};

Status decide_splits(const PlanOptions& o, int64_t work_units, int max_kv_len, int block_keys,
                     const DeviceInfo& device, SplitDecision* out) {
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
  return Status::success();
}

// Which prefill kernel serves the requested strategy and tile shape.
Status prefill_kernel_for(const PlanOptions& o, tiles::PrefillKernel* kernel) {
  const bool founding = o.tiles == TileShape::kFoundingNotes;
  switch (o.strategy) {
    case Strategy::kSplitV:
    case Strategy::kTwoPass:
      if (founding) {
        return Status::unsupported("options.tiles", "founding-notes tiles apply to the split-q/split-kv kernel only");
      }
      *kernel = o.strategy == Strategy::kSplitV ? tiles::PrefillKernel::kSplitV : tiles::PrefillKernel::kTwoPass;
      return Status::success();
    case Strategy::kAuto:
    case Strategy::kSplitQ:
    case Strategy::kSplitKV:
      *kernel = founding ? tiles::PrefillKernel::kFoundingTiles : tiles::PrefillKernel::kDefault;
      return Status::success();
  }
  return Status::invalid("options.strategy", "a known strategy", "an out-of-range value");
}

}  // namespace

Status plan_decode(const DecodeProblem& problem, const DeviceInfo& device,
                   const PlanOptions& options, Plan* plan) {
  if (plan == nullptr) return Status::invalid("plan", "a non-null pointer", "nullptr");
  if (Status s = detail::validate_decode_problem(problem); !s) return s;
  if (options.strategy == Strategy::kSplitV || options.strategy == Strategy::kTwoPass) {
    return Status::unsupported("options.strategy", std::string(to_string(options.strategy)) +
                                                       " is a prefill strategy; decode offers auto, split-q and split-kv");
  }
  if (options.tiles != TileShape::kDefault) {
    return Status::unsupported("options.tiles", "decode has one tile shape; founding-notes tiles are a prefill option");
  }
  const tiles::DecodeTile tile = tiles::decode_tile(problem.head_dim);
  Plan p;
  p.kind = Plan::Kind::kDecode;
  p.decode = problem;
  p.device = device;
  p.block_m = tile.block_m;
  p.block_n = tile.block_keys();
  p.warps = tile.warps;
  p.stages = tile.stages;
  p.smem_bytes = tile.smem_bytes();
  if (p.smem_bytes > device.smem_per_block_bytes) {
    return Status::unsupported("head_dim", "the decode tile needs " + std::to_string(p.smem_bytes) +
                                               " bytes of shared memory; the device allows " +
                                               std::to_string(device.smem_per_block_bytes));
  }
  p.blocks_per_sm = blocks_per_sm(device, p.smem_bytes, tile.threads());

  const int group = problem.num_q_heads / problem.num_kv_heads;
  const int m_tiles = ceil_div(int64_t(problem.q_len) * group, tile.block_m);
  p.work_units = int64_t(problem.batch) * problem.num_kv_heads * m_tiles;

  SplitDecision split;
  if (options.strategy == Strategy::kSplitQ) {
    if (options.num_splits > 1 || options.split_tokens > 0) {
      return Status::invalid("options.strategy", "split-kv or auto when splits are requested", "split-q");
    }
    split.note = "split-q requested: one split";
  } else if (Status s = decide_splits(options, p.work_units, problem.max_kv_len, p.block_n, device, &split);
             !s) {
    return s;
  }
  p.num_splits = split.num_splits;
  p.split_tokens = split.split_tokens;
  p.strategy = (p.num_splits > 1 || p.split_tokens > 0) ? Strategy::kSplitKV : Strategy::kSplitQ;
  p.note = split.note;
  p.grid[0] = p.num_splits;
  p.grid[1] = problem.num_kv_heads * m_tiles;
  p.grid[2] = problem.batch;
  p.cluster_combine = options.cluster_combine && device.cc_major >= 9 && p.num_splits > 1 &&
                      p.num_splits <= plan::kMaxClusterSplits && p.split_tokens == 0;
  if (p.cluster_combine) p.note += "; splits merged in a thread-block cluster";
  const int64_t rows = int64_t(problem.batch) * problem.num_q_heads * problem.q_len;
  p.workspace_bytes =
      p.cluster_combine ? 0 : plan::split_workspace(p.num_splits, rows, problem.head_dim).total_bytes;
  *plan = p;
  return Status::success();
}

Status plan_prefill(const PrefillProblem& problem, const DeviceInfo& device,
                    const PlanOptions& options, Plan* plan) {
  if (plan == nullptr) return Status::invalid("plan", "a non-null pointer", "nullptr");
  if (Status s = detail::validate_prefill_problem(problem); !s) return s;
  if (options.split_tokens > 0) {
    return Status::unsupported("options.split_tokens", "batch-invariant splits are a decode option");
  }
  tiles::PrefillKernel kernel = tiles::PrefillKernel::kDefault;
  if (Status s = prefill_kernel_for(options, &kernel); !s) return s;
  const tiles::PrefillTile tile = tiles::prefill_tile(problem.head_dim, kernel);
  Plan p;
  p.kind = Plan::Kind::kPrefill;
  p.prefill = problem;
  p.device = device;
  p.tiles = options.tiles;
  p.block_m = tile.block_m;
  p.block_n = tile.block_n;
  p.warps = tile.warps;
  p.stages = tile.stages();
  p.smem_bytes = tile.smem_bytes();
  if (p.smem_bytes > device.smem_per_block_bytes) {
    return Status::unsupported("head_dim", "the prefill tile needs " + std::to_string(p.smem_bytes) +
                                               " bytes of shared memory; the device allows " +
                                               std::to_string(device.smem_per_block_bytes));
  }
  p.blocks_per_sm = blocks_per_sm(device, p.smem_bytes, tile.threads());
  const int m_blocks = ceil_div(problem.max_q_len, tile.block_m);
  p.work_units = int64_t(problem.batch) * problem.num_q_heads * m_blocks;

  const Strategy requested = options.strategy;
  SplitDecision split;
  if (requested == Strategy::kSplitV || requested == Strategy::kTwoPass ||
      requested == Strategy::kSplitQ) {
    if (options.num_splits > 1) {
      return Status::invalid("options.num_splits", "0 or 1 with strategy " + std::string(to_string(requested)),
                             std::to_string(options.num_splits));
    }
    split.note = std::string(to_string(requested)) + " requested";
  } else if (Status s = decide_splits(options, p.work_units, problem.max_kv_len, p.block_n, device, &split);
             !s) {
    return s;
  }
  p.num_splits = split.num_splits;
  p.strategy = requested == Strategy::kAuto || requested == Strategy::kSplitKV
                   ? (p.num_splits > 1 ? Strategy::kSplitKV : Strategy::kSplitQ)
                   : requested;
  p.note = split.note;
  p.grid[0] = m_blocks;
  p.grid[1] = problem.num_q_heads;
  p.grid[2] = problem.batch * p.num_splits;
  // Rows of the output: padded [B, Lq, Hq] or varlen [total_q, Hq] -- bounded by B * max_q_len.
  const int64_t rows = int64_t(problem.batch) * problem.max_q_len * problem.num_q_heads;
  p.workspace_bytes = p.strategy == Strategy::kTwoPass
                          ? plan::two_pass_workspace(rows).total_bytes
                          : plan::split_workspace(p.num_splits, rows, problem.head_dim).total_bytes;
  *plan = p;
  return Status::success();
}

namespace plan {

tiles::PrefillKernel prefill_kernel_of(const Plan& p) {
  switch (p.strategy) {
    case Strategy::kSplitV: return tiles::PrefillKernel::kSplitV;
    case Strategy::kTwoPass: return tiles::PrefillKernel::kTwoPass;
    default:
      return p.tiles == TileShape::kFoundingNotes ? tiles::PrefillKernel::kFoundingTiles : tiles::PrefillKernel::kDefault;
  }
}

}  // namespace plan
}  // namespace splitkv
