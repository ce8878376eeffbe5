// splitkv::dist: context-parallel decode over NCCL (docs/CONTEXT_SHARDS.md). Every rank holds a
// shard of each sequence's keys; each attends its shard into split partials, the partials are
// all-gathered in rank order, and every rank merges them into the full output. Built only where
// NCCL is found (the CMake target splitkv_dist); nothing else in splitkv depends on it.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "splitkv/splitkv.hpp"

namespace splitkv::dist {

struct ShardedDecodePlan {
  Plan local;                  // this rank's shard: num_splits split partials of its keys
  int world_size = 0;          // ranks of the communicator it was planned for
  size_t workspace_bytes = 0;  // every rank's partials: world_size x (O and LSE of local)
};

// shard_problem: this rank's shard, with max_kv_len = the longest shard of any sequence on any rank.
// Every rank must plan with the same problem, options and device kind, so that all hold the same
// split count (the exchange moves equal blocks). For bits equal to one GPU's batch-invariant
// decode, set options.split_tokens and cut the shards at multiples of it (docs/CONTEXT_SHARDS.md).
Status plan_sharded_decode(const DecodeProblem& shard_problem, const DeviceInfo& device, const PlanOptions& options,
                           int world_size, ShardedDecodePlan* plan);

// tensors: the shard's decode tensors (seq_lens = this shard's keys; keys_after for causal q_len > 1,
// required on every rank but the last, whose shard ends the context;
// out / lse = the merged result, written on every rank; partial_o / partial_lse empty). comm: the
// caller's communicator of plan.world_size ranks, whose rank order is the shards' key order.
// workspace: device memory of plan.workspace_bytes, 16-byte aligned. Deterministic; capturable in a
// CUDA graph when comm and stream are. Like any collective, a rank that returns an error leaves
// the others waiting in NCCL: every argument is checked before the first launch, so give every
// rank the same shapes and check each rank's Status.
Status run_sharded_decode(const ShardedDecodePlan& plan, const DecodeTensors& tensors, void* workspace,
                          size_t workspace_bytes, ncclComm_t comm, Stream stream);

// Checks that every rank of comm holds the same plan in what the exchange and the merge depend on
// (world size, split count, batch, q_len, heads, head dim, dtype, KV format, causal): ranks that
// planned with different shard lengths or SM counts would otherwise exchange blocks of different
// sizes (NCCL hangs, or peers read past their windows). Collective (every rank calls it) and
// synchronizing, so outside graph capture; kInvalidArgument naming `plan` and the first field that
// differs. run_sharded_decode and alloc_symmetric_workspace run it themselves on the first call
// with a (comm, plan) pair; a first run_sharded_decode under graph capture is refused, so call this
// once before capturing.
Status check_plan_across_ranks(const ShardedDecodePlan& plan, ncclComm_t comm);

// The faster exchange (one NVLink host): a workspace in a symmetric NCCL window plus a device
// communicator, made once per plan. run_sharded_decode with it decodes the shard into this rank's
// window, and one merge kernel reads every rank's partials straight from their windows (NCCL's
// device API: load/store over NVLink, one barrier before and one after) in rank order: no NCCL
// collective. Same bits as the plain path. Both calls are collective (every rank of comm, the
// same plan), outside a graph capture; the run itself is capturable. Needs NCCL >= 2.28 with its
// device API, and ranks that can load/store each other's memory (kUnsupported otherwise).
struct SymmetricWorkspace {
  void* data = nullptr;         // this rank's partials: O [S, rows, Hq, D] then LSE [S, rows, Hq]
  size_t bytes = 0;
  size_t lse_offset = 0;
  int rows = 0;                 // batch x q_len x Hq of the plan: merge blocks, one barrier each
  void* window = nullptr;       // the ncclWindow_t
  void* device_comm = nullptr;  // the ncclDevComm
};
Status alloc_symmetric_workspace(const ShardedDecodePlan& plan, ncclComm_t comm, SymmetricWorkspace* workspace);
Status free_symmetric_workspace(ncclComm_t comm, SymmetricWorkspace* workspace);  // then empty

Status run_sharded_decode(const ShardedDecodePlan& plan, const DecodeTensors& tensors,
                          const SymmetricWorkspace& workspace, ncclComm_t comm, Stream stream);

}  // namespace splitkv::dist
