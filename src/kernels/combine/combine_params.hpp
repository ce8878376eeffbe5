// Plain parameters of the split-KV combine kernel.
#pragma once

#include <cstdint>

#include "kernels/common/output_params.hpp"

namespace splitkv::detail {

struct CombineParams {
  // Partials from the split kernels: row = (b * seq_rows + i) * num_q_heads + hq.
  const float* partial_o;    // [num_splits, rows, D]
  const float* partial_lse;  // [num_splits, rows]
  int64_t rows;
  int num_splits;
  // Teams of head_dim / 4 threads per row (tiles::combine_split_groups), each folding its own
  // chunks of 8 splits; 1: one team folds them all (the fused and peer merges always do).
  int split_groups = 1;
  int num_q_heads;
  int seq_rows;  // query rows per sequence slot (decode: q_len; prefill: max_q_len)

  // Query i of sequence b is token (cu_seqlens_q ? cu_seqlens_q[b] : 0) + i of its sequence's
  // output; rows with i >= that sequence's query count are skipped (varlen). Device offsets are
  // clamped as the prefill kernels clamp them (kernels/common/varlen_rows.hpp) to total_q tokens.
  const int32_t* cu_seqlens_q;
  int64_t total_q;

  OutputParams output;  // kFinal: the merged rows, in the element type of the instantiation
  // run_combine: the partials are the caller's, whose empty ones (LSE = -inf) may hold NaN or Inf
  // in O (read as zeros); false for splitkv's own partials, whose empty ones hold zeros.
  bool caller_partials = false;

  // Per-head sink logits (docs/VARIANTS.md), fp32 [num_q_heads] at sinks + hq * sinks_stride, folded
  // into each merged row once; nullptr: none (the instances without them, unchanged).
  const float* sinks = nullptr;
  int64_t sinks_stride = 0;
};

}  // namespace splitkv::detail
