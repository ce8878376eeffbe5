// The CPU reference every GPU result is compared with. Inputs are the caller's fp16/bf16 values
// (host memory), upcast; arithmetic is fp64 except for Method::kLowPrecision.
#pragma once

#include <vector>

#include "splitkv/problem.hpp"

namespace splitkv::ref {

enum class Method {
  kDirect,        // softmax over all visible keys at once
  kSplit,         // per-chunk partials (O_i, LSE_i), merged by the log-sum-exp combine
  kTwoPass,       // pass 1: each row's max and sum of exp; pass 2: softmax * V
  kLowPrecision,  // the straightforward low-precision implementation: fp32 scores and softmax,
                  // P rounded to the input dtype before P*V, output rounded (the error yardstick
                  // of FlashAttention's tolerance rule)
};

struct Options {
  Method method = Method::kDirect;
  int num_splits = 1;     // kSplit: chunks per sequence (see kernels/common/split_rule.hpp)
  int split_tokens = 0;   // kSplit: fixed chunk size instead (batch-invariant mode)
  int block_keys = 64;    // kSplit: chunks are rounded up to this many keys
};

// Dense results in the logical layout of the output tensors:
//   out: decode and padded prefill [B, Lq, Hq, D]; varlen prefill [total_q, Hq, D]
//   lse: decode and padded prefill [B, Hq, Lq];    varlen prefill [Hq, total_q]
// Rows that see no key have out = 0 and lse = -inf.
struct Result {
  std::vector<double> out;
  std::vector<double> lse;
};

// `tensors` must point to host memory (seq_lens, block_table and cu_seqlens included).
Result decode(const DecodeProblem& problem, const DecodeTensors& tensors, const Options& options = {});
Result prefill(const PrefillProblem& problem, const PrefillTensors& tensors, const Options& options = {});

}  // namespace splitkv::ref
