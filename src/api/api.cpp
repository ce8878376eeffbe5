// Public entry points: validate -> fill kernel parameters from the plan -> launch.
// Nothing here allocates, synchronizes or reads device memory, so every call can be captured in a
// CUDA graph.
#include <cuda_runtime_api.h>

#include <string>

#include "api/device_arch.hpp"
#include "api/validate.hpp"
#include "launch/launch_config.hpp"
#include "plan/plan_kernels.hpp"
#include "plan/workspace_layout.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv {
namespace {

Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::success();
  return Status(StatusCode::kCudaError, "", std::string(what) + ": " + cudaGetErrorString(error));
}

Status check_workspace(const Plan& plan, const void* workspace, size_t workspace_bytes) {
  if (plan.workspace_bytes == 0) return Status::success();
  if (workspace == nullptr) {
    return Status::invalid("workspace", "a device buffer of " + std::to_string(plan.workspace_bytes) + " bytes",
                           "nullptr");
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    return Status::invalid("workspace", "a 16-byte aligned address", "a misaligned address");
  }
  if (workspace_bytes < plan.workspace_bytes) {
    return Status(StatusCode::kWorkspaceTooSmall, "workspace_bytes",
                  "expected >= " + std::to_string(plan.workspace_bytes) + " (plan.workspace_bytes), got " +
                      std::to_string(workspace_bytes));
  }
  return Status::success();
}

constexpr float kLog2e = 1.44269504088896340736f;

// The combine step reads the partials of either kernel family the same way.
template <class KernelParams>
detail::CombineParams combine_params(const KernelParams& p, int64_t rows, int seq_rows,
                                     const int32_t* cu_seqlens_q) {
  detail::CombineParams c{};
  c.partial_o = p.partial_o;
  c.partial_lse = p.partial_lse;
  c.rows = rows;
  c.num_splits = p.num_splits;
  c.num_q_heads = p.num_q_heads;
  c.seq_rows = seq_rows;
  c.cu_seqlens_q = cu_seqlens_q;
  c.out = p.out;
  c.o_batch_stride = p.o_batch_stride;
  c.o_token_stride = p.o_token_stride;
  c.o_head_stride = p.o_head_stride;
  c.lse = p.lse;
  c.lse_batch_stride = p.lse_batch_stride;
  c.lse_head_stride = p.lse_head_stride;
  c.lse_token_stride = p.lse_token_stride;
  return c;
}

detail::LaunchConfig launch_config(Stream stream) {
  detail::LaunchConfig config;
  config.stream = stream;
  config.use_pdl = detail::current_device_supports_pdl();
  return config;
}

}  // namespace

Status run_decode(const Plan& plan, const DecodeTensors& t, void* workspace, size_t workspace_bytes, Stream stream) {
  if (plan.kind != Plan::Kind::kDecode) return Status::invalid("plan", "a decode plan", "a prefill plan");
  const DecodeProblem& pr = plan.decode;
  if (Status s = detail::validate_decode_problem(pr); !s) return s;
  if (Status s = detail::validate_decode_tensors(pr, t); !s) return s;
  if (Status s = check_workspace(plan, workspace, workspace_bytes); !s) return s;
  if (Status s = detail::check_compiled(pr.dtype, pr.head_dim); !s) return s;

  detail::DecodeParams p{};
  p.q = t.q.data;
  p.q_batch_stride = t.q.stride[0];
  p.q_token_stride = t.q.stride[1];
  p.q_head_stride = t.q.stride[2];
  p.k = t.k.data;
  p.v = t.v.data;
  p.k_page_stride = t.k.stride[0];
  p.k_token_stride = t.k.stride[1];
  p.k_head_stride = t.k.stride[2];
  p.v_page_stride = t.v.stride[0];
  p.v_token_stride = t.v.stride[1];
  p.v_head_stride = t.v.stride[2];
  if (pr.page_size > 0) {
    p.block_table = static_cast<const int32_t*>(t.block_table.data);
    p.block_table_batch_stride = t.block_table.stride[0];
    p.page_size = pr.page_size;
    p.num_pages = static_cast<int>(t.k.shape[0]);
  }
  p.seq_lens = static_cast<const int32_t*>(t.seq_lens.data);
  p.kv_capacity = detail::decode_kv_capacity(pr, t);
  p.out = t.out.data;
  p.o_batch_stride = t.out.stride[0];
  p.o_token_stride = t.out.stride[1];
  p.o_head_stride = t.out.stride[2];
  if (t.lse.data != nullptr) {
    p.lse = static_cast<float*>(t.lse.data);
    p.lse_batch_stride = t.lse.stride[0];
    p.lse_head_stride = t.lse.stride[1];
    p.lse_token_stride = t.lse.stride[2];
  }
  p.batch = pr.batch;
  p.num_q_heads = pr.num_q_heads;
  p.num_kv_heads = pr.num_kv_heads;
  p.q_len = pr.q_len;
  p.group = pr.num_q_heads / pr.num_kv_heads;
  p.rows_per_kv = pr.q_len * p.group;
  p.m_tiles = (p.rows_per_kv + plan.block_m - 1) / plan.block_m;
  p.num_splits = plan.num_splits;
  p.split_tokens = plan.split_tokens;
  p.cluster_combine = plan.cluster_combine;
  p.causal = pr.causal;
  p.scale_log2 = detail::resolved_softmax_scale(pr.softmax_scale, pr.head_dim) * kLog2e;

  const int64_t rows = int64_t(pr.batch) * pr.q_len * pr.num_q_heads;
  if (plan.num_splits > 1 && !plan.cluster_combine) {
    const plan::SplitWorkspace ws = plan::split_workspace(plan.num_splits, rows, pr.head_dim);
    char* base = static_cast<char*>(workspace);
    p.partial_o = reinterpret_cast<float*>(base + ws.o_offset);
    p.partial_lse = reinterpret_cast<float*>(base + ws.lse_offset);
    p.partial_rows = rows;
  }
  detail::LaunchConfig config = launch_config(stream);
  if (plan.cluster_combine) {
    if (!config.use_pdl) {  // clusters exist from sm_90 on, like PDL
      return Status::unsupported("plan.cluster_combine", "needs an sm_90 device; plan with this device's DeviceInfo");
    }
    config.cluster_blocks = plan.num_splits;
  }
  if (Status s = cuda_status(detail::launch_decode(pr.dtype, pr.head_dim, p, config), "decode kernel launch"); !s) {
    return s;
  }
  if (plan.num_splits == 1 || plan.cluster_combine) return Status::success();
  config.cluster_blocks = 1;
  const detail::CombineParams c = combine_params(p, rows, pr.q_len, nullptr);
  return cuda_status(detail::launch_combine(pr.dtype, pr.head_dim, c, config), "combine kernel launch");
}

Status run_prefill(const Plan& plan, const PrefillTensors& t, void* workspace, size_t workspace_bytes,
                   Stream stream) {
  if (plan.kind != Plan::Kind::kPrefill) return Status::invalid("plan", "a prefill plan", "a decode plan");
  const PrefillProblem& pr = plan.prefill;
  if (Status s = detail::validate_prefill_problem(pr); !s) return s;
  if (Status s = detail::validate_prefill_tensors(pr, t); !s) return s;
  if (Status s = check_workspace(plan, workspace, workspace_bytes); !s) return s;
  if (Status s = detail::check_compiled(pr.dtype, pr.head_dim); !s) return s;

  // Padded tensors are [B, L, H, D]; varlen ones [total, H, D] with the batch folded into tokens.
  const int token_dim = pr.varlen ? 0 : 1;
  auto strides = [&](const TensorRef& x, int64_t* batch, int64_t* token, int64_t* head) {
    *batch = pr.varlen ? 0 : x.stride[0];
    *token = x.stride[token_dim];
    *head = x.stride[token_dim + 1];
  };
  detail::PrefillParams p{};
  p.q = t.q.data;
  p.k = t.k.data;
  p.v = t.v.data;
  p.out = t.out.data;
  strides(t.q, &p.q_batch_stride, &p.q_token_stride, &p.q_head_stride);
  strides(t.k, &p.k_batch_stride, &p.k_token_stride, &p.k_head_stride);
  strides(t.v, &p.v_batch_stride, &p.v_token_stride, &p.v_head_stride);
  strides(t.out, &p.o_batch_stride, &p.o_token_stride, &p.o_head_stride);
  if (t.lse.data != nullptr) {
    // Padded [B, Hq, Lq]; varlen [Hq, total_q].
    p.lse = static_cast<float*>(t.lse.data);
    p.lse_batch_stride = pr.varlen ? 0 : t.lse.stride[0];
    p.lse_head_stride = t.lse.stride[pr.varlen ? 0 : 1];
    p.lse_token_stride = t.lse.stride[pr.varlen ? 1 : 2];
  }
  if (pr.varlen) {
    p.cu_seqlens_q = static_cast<const int32_t*>(t.cu_seqlens_q.data);
    p.cu_seqlens_k = static_cast<const int32_t*>(t.cu_seqlens_k.data);
    p.total_q = t.q.shape[0];
    p.total_k = t.k.shape[0];
  }
  p.batch = pr.batch;
  p.num_q_heads = pr.num_q_heads;
  p.num_kv_heads = pr.num_kv_heads;
  p.group = pr.num_q_heads / pr.num_kv_heads;
  p.max_q_len = pr.max_q_len;
  p.max_kv_len = pr.max_kv_len;
  p.causal = pr.causal;
  p.scale_log2 = detail::resolved_softmax_scale(pr.softmax_scale, pr.head_dim) * kLog2e;
  p.num_splits = plan.num_splits;

  const int64_t rows = int64_t(pr.batch) * pr.max_q_len * pr.num_q_heads;
  char* base = static_cast<char*>(workspace);
  if (plan.strategy == Strategy::kTwoPass) {
    const plan::TwoPassWorkspace ws = plan::two_pass_workspace(rows);
    p.row_max = reinterpret_cast<float*>(base + ws.max_offset);
    p.row_sum = reinterpret_cast<float*>(base + ws.sum_offset);
  } else if (plan.num_splits > 1) {
    const plan::SplitWorkspace ws = plan::split_workspace(plan.num_splits, rows, pr.head_dim);
    p.partial_o = reinterpret_cast<float*>(base + ws.o_offset);
    p.partial_lse = reinterpret_cast<float*>(base + ws.lse_offset);
    p.partial_rows = rows;
  }
  const detail::LaunchConfig config = launch_config(stream);
  if (Status s = cuda_status(detail::launch_prefill(pr.dtype, pr.head_dim, plan::prefill_kernel_of(plan), p, config),
                             "prefill kernel launch");
      !s) {
    return s;
  }
  if (plan.num_splits == 1) return Status::success();

  const detail::CombineParams c = combine_params(p, rows, pr.max_q_len, p.cu_seqlens_q);
  return cuda_status(detail::launch_combine(pr.dtype, pr.head_dim, c, config), "combine kernel launch");
}

}  // namespace splitkv
