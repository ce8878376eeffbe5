// Context-parallel decode: local shard -> split partials -> exchange -> merge in rank order.
// Two exchanges: NCCL all-gathers into a plain workspace followed by the combine kernel, or the
// peer merge over symmetric windows (dist/peer_merge.hpp).
#include "splitkv/dist.hpp"

#include <cuda_runtime_api.h>

#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "api/output_rows.hpp"
#include "validate/validate.hpp"
#include "plan/workspace_layout.hpp"
#if SPLITKV_NCCL_DEVICE_API
#include "dist/peer_merge.hpp"
#endif

namespace splitkv::dist {
namespace {

Status nccl_status(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::success();
  return Status(StatusCode::kCudaError, "comm", std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

// One rank's partials: O [splits, rows, Hq, D] then LSE [splits, rows, Hq], fp32.
struct RankPartials {
  size_t o_elements = 0, lse_elements = 0;
  int64_t splits = 0, rows = 0;  // rows: batch x q_len (the tensors' second dimension)
};

RankPartials rank_partials(const Plan& local) {
  const DecodeProblem& p = local.decode();
  RankPartials r;
  r.splits = local.num_splits();
  r.rows = int64_t(p.batch) * p.q_len;
  r.lse_elements = size_t(r.splits) * r.rows * p.num_q_heads;
  r.o_elements = r.lse_elements * p.head_dim;
  return r;
}

// The plain workspace: every rank's partials, rank-major, O of all ranks then LSE of all ranks.
size_t plain_lse_offset(const RankPartials& r, int world) {
  return plan::align_up(size_t(world) * r.o_elements * sizeof(float));
}

// A symmetric window: this rank's partials alone, O then LSE.
size_t window_lse_offset(const RankPartials& r) { return plan::align_up(r.o_elements * sizeof(float)); }

// What every rank's plan must share, in a fixed-size record: the all-gather of it cannot itself
// hang on a mismatch.
constexpr int kDigestFields = 10;
constexpr const char* kDigestNames[kDigestFields] = {"world_size", "local.num_splits", "batch",     "q_len",
                                                     "num_q_heads", "num_kv_heads",    "head_dim", "dtype",
                                                     "kv_format",   "causal"};
void plan_digest(const ShardedDecodePlan& plan, int64_t (&d)[kDigestFields]) {
  const DecodeProblem& p = plan.local.decode();
  const int64_t values[kDigestFields] = {plan.world_size, plan.local.num_splits(), p.batch,
                                         p.q_len,         p.num_q_heads,         p.num_kv_heads,
                                         p.head_dim,      int64_t(p.dtype),      int64_t(p.kv_format),
                                         p.causal ? 1 : 0};
  for (int i = 0; i < kDigestFields; ++i) d[i] = values[i];
}

// The (comm, plan) pairs checked so far in this process.
std::mutex& checked_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::tuple<ncclComm_t, uint64_t, int>>& checked_pairs() {
  static std::set<std::tuple<ncclComm_t, uint64_t, int>> pairs;
  return pairs;
}
std::tuple<ncclComm_t, uint64_t, int> checked_key(const ShardedDecodePlan& plan, ncclComm_t comm) {
  return {comm, plan.local.seal(), plan.world_size};
}

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::success();
  return Status(StatusCode::kCudaError, "comm", std::string(what) + ": " + cudaGetErrorString(e));
}

// check_plan_across_ranks, once per (comm, plan) pair; refused under graph capture.
Status ensure_plan_checked(const ShardedDecodePlan& plan, ncclComm_t comm, Stream stream) {
  {
    std::lock_guard<std::mutex> lock(checked_mutex());
    if (checked_pairs().count(checked_key(plan, comm)) != 0) return Status::success();
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (Status s = cuda_status(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture), "stream"); !s) {
    return s;
  }
  if (capture != cudaStreamCaptureStatusNone) {
    return Status::invalid("comm", "a plan checked across the ranks before graph capture (call "
                                   "dist::check_plan_across_ranks(plan, comm) once first)",
                           "a first call under capture");
  }
  return check_plan_across_ranks(plan, comm);
}

// Checks shared by both exchanges, all before the first launch (a rank that fails after the
// exchange started would leave the others waiting in NCCL). Fills the merge's problem.
Status check_call(const ShardedDecodePlan& plan, const DecodeTensors& tensors, ncclComm_t comm, int* rank,
                  CombineProblem* merged) {
  if (comm == nullptr) return Status::invalid("comm", "an NCCL communicator", "nullptr");
  int world = 0;
  if (Status s = nccl_status(ncclCommCount(comm, &world), "ncclCommCount"); !s) return s;
  if (Status s = nccl_status(ncclCommUserRank(comm, rank), "ncclCommUserRank"); !s) return s;
  if (world != plan.world_size) {
    return Status::invalid("comm", "a communicator of plan.world_size=" + std::to_string(plan.world_size) + " ranks",
                           std::to_string(world) + " ranks");
  }
  if (!tensors.partial_o.empty() || !tensors.partial_lse.empty()) {
    return Status::invalid("partial_o", "empty (run_sharded_decode writes the merged out and lse)", "a tensor");
  }
  const DecodeProblem& p = plan.local.decode();
  // A shard followed by others sees only its own keys unless told how many come after it.
  if (p.causal && p.q_len > 1 && *rank != world - 1 && tensors.keys_after.empty()) {
    return Status::invalid("keys_after",
                           "the keys of the context after this shard (causal q_len > 1 on a rank other than the last)",
                           "empty on rank " + std::to_string(*rank));
  }
  const RankPartials r = rank_partials(plan.local);
  CombineProblem cp;
  cp.num_splits = static_cast<int>(r.splits) * world;
  cp.batch = p.batch;
  cp.seq_len = p.q_len;
  cp.num_heads = p.num_q_heads;
  cp.head_dim = p.head_dim;
  cp.dtype = p.dtype;
  // Shapes only: the merged partials' geometry and the caller's out / lse.
  CombineTensors shapes;
  alignas(16) static float any[4];  // stands for the merged partials: never read
  shapes.partial_o = TensorRef::contiguous(any, DType::kF32, {cp.num_splits, r.rows, p.num_q_heads, p.head_dim});
  shapes.partial_lse = TensorRef::contiguous(any, DType::kF32, {cp.num_splits, r.rows, p.num_q_heads});
  shapes.out = tensors.out;
  shapes.lse = tensors.lse;
  if (Status s = splitkv::detail::validate_combine(cp, shapes); !s) return s;
  *merged = cp;
  return Status::success();
}

// The shard's decode into the split partials at o / lse.
Status decode_shard(const ShardedDecodePlan& plan, const DecodeTensors& tensors, float* o, float* lse, Stream stream) {
  const DecodeProblem& p = plan.local.decode();
  const RankPartials r = rank_partials(plan.local);
  DecodeTensors local = tensors;
  local.out = local.lse = TensorRef{};
  local.partial_o = TensorRef::contiguous(o, DType::kF32, {r.splits, r.rows, p.num_q_heads, p.head_dim});
  local.partial_lse = TensorRef::contiguous(lse, DType::kF32, {r.splits, r.rows, p.num_q_heads});
  return run_decode(plan.local, local, nullptr, 0, stream);
}

}  // namespace

Status plan_sharded_decode(const DecodeProblem& shard_problem, const DeviceInfo& device, const PlanOptions& options,
                           int world_size, ShardedDecodePlan* plan) {
  if (plan == nullptr) return Status::invalid("plan", "a non-null pointer", "nullptr");
  if (world_size < 1) return Status::invalid("world_size", ">= 1", std::to_string(world_size));
  ShardedDecodePlan p;
  // A shard's partials come from the decode kernels (keys_after, caller partials): never the
  // chunked-prefill route.
  PlanOptions shard_options = options;
  shard_options.tuning.prefill_route = false;
  if (Status s = plan_decode(shard_problem, device, shard_options, &p.local); !s) return s;
  if (p.local.decode_via_prefill()) {
    return Status::unsupported("options.family", "a decode family for a context shard (" + options.family +
                                                     " serves decode by chunked prefill, which takes no shard)");
  }
  p.world_size = world_size;
  const RankPartials r = rank_partials(p.local);
  p.workspace_bytes = plain_lse_offset(r, world_size) + plan::align_up(size_t(world_size) * r.lse_elements * sizeof(float));
  *plan = p;
  return Status::success();
}

Status run_sharded_decode(const ShardedDecodePlan& plan, const DecodeTensors& tensors, void* workspace,
                          size_t workspace_bytes, ncclComm_t comm, Stream stream) {
  int rank = 0;
  CombineProblem cp;
  if (Status s = check_call(plan, tensors, comm, &rank, &cp); !s) return s;
  if (Status s = splitkv::detail::validate_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) return s;
  if (Status s = ensure_plan_checked(plan, comm, stream); !s) return s;
  const RankPartials r = rank_partials(plan.local);
  float* all_o = static_cast<float*>(workspace);
  float* all_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + plain_lse_offset(r, plan.world_size));
  float* my_o = all_o + size_t(rank) * r.o_elements;  // in place: NCCL's all-gather slot of this rank
  float* my_lse = all_lse + size_t(rank) * r.lse_elements;
  if (Status s = decode_shard(plan, tensors, my_o, my_lse, stream); !s) return s;

  if (Status s = nccl_status(ncclGroupStart(), "ncclGroupStart"); !s) return s;
  ncclResult_t res = ncclAllGather(my_o, all_o, r.o_elements, ncclFloat32, comm, stream);
  if (res == ncclSuccess) res = ncclAllGather(my_lse, all_lse, r.lse_elements, ncclFloat32, comm, stream);
  const ncclResult_t end = ncclGroupEnd();
  if (Status s = nccl_status(res != ncclSuccess ? res : end, "ncclAllGather"); !s) return s;

  CombineTensors ct;
  ct.partial_o = TensorRef::contiguous(all_o, DType::kF32, {cp.num_splits, r.rows, cp.num_heads, cp.head_dim});
  ct.partial_lse = TensorRef::contiguous(all_lse, DType::kF32, {cp.num_splits, r.rows, cp.num_heads});
  ct.out = tensors.out;
  ct.lse = tensors.lse;
  return run_combine(cp, ct, stream);
}

Status check_plan_across_ranks(const ShardedDecodePlan& plan, ncclComm_t comm) {
  if (comm == nullptr) return Status::invalid("comm", "an NCCL communicator", "nullptr");
  int world = 0, rank = 0;
  if (Status s = nccl_status(ncclCommCount(comm, &world), "ncclCommCount"); !s) return s;
  if (Status s = nccl_status(ncclCommUserRank(comm, &rank), "ncclCommUserRank"); !s) return s;
  int64_t mine[kDigestFields];
  plan_digest(plan, mine);
  std::vector<int64_t> all(size_t(world) * kDigestFields);
  void* buffer = nullptr;  // once per (comm, plan): a small allocation outside the run path
  if (Status s = cuda_status(cudaMalloc(&buffer, all.size() * sizeof(int64_t)), "cudaMalloc"); !s) return s;
  int64_t* gathered = static_cast<int64_t*>(buffer);
  int64_t* slot = gathered + size_t(rank) * kDigestFields;
  Status done = cuda_status(cudaMemcpy(slot, mine, sizeof mine, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (done) done = nccl_status(ncclAllGather(slot, gathered, kDigestFields, ncclInt64, comm, nullptr), "ncclAllGather");
  if (done) {
    done = cuda_status(cudaMemcpy(all.data(), gathered, all.size() * sizeof(int64_t), cudaMemcpyDeviceToHost),
                       "cudaMemcpy");
  }
  cudaFree(buffer);
  if (!done) return done;
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < kDigestFields; ++i) {
      const int64_t theirs = all[size_t(r) * kDigestFields + i];
      if (theirs == mine[i]) continue;
      return Status::invalid("plan", "the same " + std::string(kDigestNames[i]) + " on every rank (plan every shard "
                                     "with the same problem, options and device description)",
                             std::to_string(mine[i]) + " on rank " + std::to_string(rank) + ", " +
                                 std::to_string(theirs) + " on rank " + std::to_string(r));
    }
  }
  std::lock_guard<std::mutex> lock(checked_mutex());
  checked_pairs().insert(checked_key(plan, comm));
  return Status::success();
}

#if SPLITKV_NCCL_DEVICE_API
Status alloc_symmetric_workspace(const ShardedDecodePlan& plan, ncclComm_t comm, SymmetricWorkspace* workspace) {
  if (workspace == nullptr) return Status::invalid("workspace", "a non-null pointer", "nullptr");
  if (comm == nullptr) return Status::invalid("comm", "an NCCL communicator", "nullptr");
  if (workspace->data != nullptr) return Status::invalid("workspace", "an empty SymmetricWorkspace", "one in use");
  if (Status s = ensure_plan_checked(plan, comm, nullptr); !s) return s;
  const RankPartials r = rank_partials(plan.local);
  SymmetricWorkspace w;
  w.lse_offset = window_lse_offset(r);
  w.bytes = w.lse_offset + plan::align_up(r.lse_elements * sizeof(float));
  w.rows = static_cast<int>(r.rows * plan.local.decode().num_q_heads);
  if (Status s = nccl_status(ncclMemAlloc(&w.data, w.bytes), "ncclMemAlloc"); !s) return s;
  ncclWindow_t window = nullptr;
  Status made = nccl_status(ncclCommWindowRegister(comm, w.data, w.bytes, &window, NCCL_WIN_COLL_SYMMETRIC),
                            "ncclCommWindowRegister");
  if (made) {
    w.window = window;
    made = nccl_status(detail::create_device_comm(comm, w.rows, &w.device_comm), "ncclDevCommCreate");
    if (!made) ncclCommWindowDeregister(comm, window);
  }
  if (!made) {
    ncclMemFree(w.data);
    return made.code() == StatusCode::kCudaError ? Status::unsupported("workspace", made.message()) : made;
  }
  *workspace = w;
  return Status::success();
}

Status free_symmetric_workspace(ncclComm_t comm, SymmetricWorkspace* workspace) {
  if (workspace == nullptr || workspace->data == nullptr) return Status::success();
  ncclResult_t r = detail::destroy_device_comm(comm, workspace->device_comm);
  const ncclResult_t dereg = ncclCommWindowDeregister(comm, static_cast<ncclWindow_t>(workspace->window));
  const ncclResult_t freed = ncclMemFree(workspace->data);
  *workspace = SymmetricWorkspace{};
  if (r == ncclSuccess) r = dereg;
  if (r == ncclSuccess) r = freed;
  return nccl_status(r, "freeing the symmetric workspace");
}

Status run_sharded_decode(const ShardedDecodePlan& plan, const DecodeTensors& tensors,
                          const SymmetricWorkspace& workspace, ncclComm_t comm, Stream stream) {
  int rank = 0;
  CombineProblem cp;
  if (Status s = check_call(plan, tensors, comm, &rank, &cp); !s) return s;
  if (Status s = ensure_plan_checked(plan, comm, stream); !s) return s;
  const RankPartials r = rank_partials(plan.local);
  if (workspace.data == nullptr || workspace.device_comm == nullptr ||
      workspace.rows != r.rows * plan.local.decode().num_q_heads ||
      workspace.lse_offset != window_lse_offset(r)) {
    return Status::invalid("workspace", "a SymmetricWorkspace made by alloc_symmetric_workspace for this plan",
                           workspace.data == nullptr ? "an empty one" : "one of another plan");
  }
  float* o = static_cast<float*>(workspace.data);
  float* lse = reinterpret_cast<float*>(static_cast<char*>(workspace.data) + workspace.lse_offset);
  if (Status s = decode_shard(plan, tensors, o, lse, stream); !s) return s;

  detail::PeerMergeParams pm{};
  pm.combine.rows = workspace.rows;
  pm.combine.num_splits = cp.num_splits;
  pm.combine.num_q_heads = cp.num_heads;
  pm.combine.seq_rows = cp.seq_len;
  pm.combine.cu_seqlens_q = nullptr;
  pm.combine.output = splitkv::detail::final_output(tensors.out, tensors.lse, false);
  pm.device_comm = workspace.device_comm;
  pm.window = static_cast<ncclWindow_t>(workspace.window);
  pm.lse_offset = workspace.lse_offset;
  pm.splits_per_rank = static_cast<int>(r.splits);
  const cudaError_t e = detail::launch_peer_merge(pm, cp.dtype, cp.head_dim, static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) return Status(StatusCode::kCudaError, "", std::string("peer merge: ") + cudaGetErrorString(e));
  return Status::success();
}
#else
Status alloc_symmetric_workspace(const ShardedDecodePlan&, ncclComm_t, SymmetricWorkspace*) {
  return Status::unsupported("workspace", "this build's NCCL has no device API (NCCL >= 2.28 needed)");
}
Status free_symmetric_workspace(ncclComm_t, SymmetricWorkspace*) { return Status::success(); }
Status run_sharded_decode(const ShardedDecodePlan&, const DecodeTensors&, const SymmetricWorkspace&, ncclComm_t,
                          Stream) {
  return Status::unsupported("workspace", "this build's NCCL has no device API (NCCL >= 2.28 needed)");
}
#endif

}  // namespace splitkv::dist
