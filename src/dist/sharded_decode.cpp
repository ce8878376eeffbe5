// Context-parallel decode: local shard -> split partials -> all-gather in rank order -> combine.
#include "splitkv/dist.hpp"

#include <string>

#include "api/validate.hpp"
#include "plan/workspace_layout.hpp"

namespace splitkv::dist {
namespace {

Status nccl_status(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::success();
  return Status(StatusCode::kCudaError, "comm", std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

// Every rank's partials, rank-major: O [world, splits, rows, Hq, D], then LSE [world, splits, rows, Hq].
struct GatheredPartials {
  size_t o_elements_per_rank = 0, lse_elements_per_rank = 0;
  size_t lse_offset_bytes = 0, total_bytes = 0;
};

GatheredPartials gathered_partials(const Plan& local, int world_size) {
  const DecodeProblem& p = local.decode;
  GatheredPartials g;
  const size_t rows = size_t(p.batch) * p.q_len * p.num_q_heads;
  g.o_elements_per_rank = size_t(local.num_splits) * rows * p.head_dim;
  g.lse_elements_per_rank = size_t(local.num_splits) * rows;
  g.lse_offset_bytes = plan::align_up(size_t(world_size) * g.o_elements_per_rank * sizeof(float));
  g.total_bytes = g.lse_offset_bytes + plan::align_up(size_t(world_size) * g.lse_elements_per_rank * sizeof(float));
  return g;
}

}  // namespace

Status plan_sharded_decode(const DecodeProblem& shard_problem, const DeviceInfo& device, const PlanOptions& options,
                           int world_size, ShardedDecodePlan* plan) {
  if (plan == nullptr) return Status::invalid("plan", "a non-null pointer", "nullptr");
  if (world_size < 1) return Status::invalid("world_size", ">= 1", std::to_string(world_size));
  ShardedDecodePlan p;
  if (Status s = plan_decode(shard_problem, device, options, &p.local); !s) return s;
  p.world_size = world_size;
  p.workspace_bytes = gathered_partials(p.local, world_size).total_bytes;
  *plan = p;
  return Status::success();
}

Status run_sharded_decode(const ShardedDecodePlan& plan, const DecodeTensors& tensors, void* workspace,
                          size_t workspace_bytes, ncclComm_t comm, Stream stream) {
  if (comm == nullptr) return Status::invalid("comm", "an NCCL communicator", "nullptr");
  int world = 0, rank = 0;
  if (Status s = nccl_status(ncclCommCount(comm, &world), "ncclCommCount"); !s) return s;
  if (Status s = nccl_status(ncclCommUserRank(comm, &rank), "ncclCommUserRank"); !s) return s;
  if (world != plan.world_size) {
    return Status::invalid("comm", "a communicator of plan.world_size=" + std::to_string(plan.world_size) + " ranks",
                           std::to_string(world) + " ranks");
  }
  if (!tensors.partial_o.empty() || !tensors.partial_lse.empty()) {
    return Status::invalid("partial_o", "empty (run_sharded_decode writes the merged out and lse)", "a tensor");
  }
  if (Status s = detail::validate_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) return s;
  const DecodeProblem& p = plan.local.decode;
  const GatheredPartials g = gathered_partials(plan.local, world);
  float* all_o = static_cast<float*>(workspace);
  float* all_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + g.lse_offset_bytes);
  float* my_o = all_o + size_t(rank) * g.o_elements_per_rank;  // in place: NCCL's all-gather slot of this rank
  float* my_lse = all_lse + size_t(rank) * g.lse_elements_per_rank;

  const int64_t S = plan.local.num_splits, rows = int64_t(p.batch) * p.q_len, H = p.num_q_heads, D = p.head_dim;
  CombineProblem cp;
  cp.num_splits = static_cast<int>(S) * world;
  cp.batch = p.batch;
  cp.seq_len = p.q_len;
  cp.num_heads = p.num_q_heads;
  cp.head_dim = p.head_dim;
  cp.dtype = p.dtype;
  CombineTensors ct;
  ct.partial_o = TensorRef::contiguous(all_o, DType::kF32, {S * world, rows, H, D});
  ct.partial_lse = TensorRef::contiguous(all_lse, DType::kF32, {S * world, rows, H});
  ct.out = tensors.out;
  ct.lse = tensors.lse;
  // Everything is checked before the first launch: a rank that fails after the exchange started
  // would leave the others waiting in NCCL.
  if (Status s = detail::validate_combine(cp, ct); !s) return s;

  DecodeTensors local = tensors;
  local.out = local.lse = TensorRef{};
  local.partial_o = TensorRef::contiguous(my_o, DType::kF32, {S, rows, H, D});
  local.partial_lse = TensorRef::contiguous(my_lse, DType::kF32, {S, rows, H});
  if (Status s = run_decode(plan.local, local, nullptr, 0, stream); !s) return s;

  if (Status s = nccl_status(ncclGroupStart(), "ncclGroupStart"); !s) return s;
  ncclResult_t r = ncclAllGather(my_o, all_o, g.o_elements_per_rank, ncclFloat32, comm, stream);
  if (r == ncclSuccess) r = ncclAllGather(my_lse, all_lse, g.lse_elements_per_rank, ncclFloat32, comm, stream);
  const ncclResult_t end = ncclGroupEnd();
  if (Status s = nccl_status(r != ncclSuccess ? r : end, "ncclAllGather"); !s) return s;

  return run_combine(cp, ct, stream);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
Status alloc_symmetric_workspace(const ShardedDecodePlan& plan, ncclComm_t comm, SymmetricWorkspace* workspace) {
  if (workspace == nullptr) return Status::invalid("workspace", "a non-null pointer", "nullptr");
  if (comm == nullptr) return Status::invalid("comm", "an NCCL communicator", "nullptr");
  if (workspace->data != nullptr) return Status::invalid("workspace", "an empty SymmetricWorkspace", "one in use");
  SymmetricWorkspace w;
  w.bytes = plan.workspace_bytes;
  if (Status s = nccl_status(ncclMemAlloc(&w.data, w.bytes), "ncclMemAlloc"); !s) return s;
  ncclWindow_t window = nullptr;
  if (Status s = nccl_status(ncclCommWindowRegister(comm, w.data, w.bytes, &window, NCCL_WIN_COLL_SYMMETRIC),
                             "ncclCommWindowRegister");
      !s) {
    ncclMemFree(w.data);
    return s;
  }
  w.window = window;
  *workspace = w;
  return Status::success();
}

Status free_symmetric_workspace(ncclComm_t comm, SymmetricWorkspace* workspace) {
  if (workspace == nullptr || workspace->data == nullptr) return Status::success();
  if (Status s = nccl_status(ncclCommWindowDeregister(comm, static_cast<ncclWindow_t>(workspace->window)),
                             "ncclCommWindowDeregister");
      !s) {
    return s;
  }
  const ncclResult_t r = ncclMemFree(workspace->data);
  *workspace = SymmetricWorkspace{};
  return nccl_status(r, "ncclMemFree");
}
#else
Status alloc_symmetric_workspace(const ShardedDecodePlan&, ncclComm_t, SymmetricWorkspace*) {
  return Status::unsupported("workspace", "symmetric windows need NCCL >= 2.27");
}
Status free_symmetric_workspace(ncclComm_t, SymmetricWorkspace*) { return Status::success(); }
#endif

}  // namespace splitkv::dist
