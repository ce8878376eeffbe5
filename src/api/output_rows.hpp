// Where a kernel writes its final rows, from the caller's tensors (shared by the API and splitkv::dist).
#pragma once

#include "kernels/common/output_params.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

// Final rows into `out` / `lse`: O [B, L, H, D] or varlen [total, H, D]; LSE [B, H, L] or [H, total].
inline OutputParams final_output(const TensorRef& out, const TensorRef& lse, bool varlen) {
  OutputParams o{};
  o.mode = OutputMode::kFinal;
  const int token_dim = varlen ? 0 : 1;
  o.out = out.data;
  o.o_batch_stride = varlen ? 0 : out.stride[0];
  o.o_token_stride = out.stride[token_dim];
  o.o_head_stride = out.stride[token_dim + 1];
  if (lse.data != nullptr) {
    o.lse = static_cast<float*>(lse.data);
    o.lse_batch_stride = varlen ? 0 : lse.stride[0];
    o.lse_head_stride = lse.stride[varlen ? 0 : 1];
    o.lse_token_stride = lse.stride[varlen ? 1 : 2];
  }
  return o;
}

}  // namespace splitkv::detail
