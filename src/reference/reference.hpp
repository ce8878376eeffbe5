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
  kLowPrecision,  // the straightforward low-precision implementation: K/V in the input dtype (a
                  // quantized cache dequantized into it), fp32 scores and softmax, P rounded to the
                  // input dtype before P*V, output rounded (the error yardstick of FlashAttention's
                  // tolerance rule)
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

// A shard of every sequence's keys (context parallelism: a sequence's cache spread over GPUs). The
// shard's tensors hold keys [key_offset[b], key_offset[b] + seq_lens[b]) of sequence b, whose whole
// context has total_len[b] keys; causal masking counts global positions (query i of q_len sees
// keys [0, total_len - q_len + i]). The result is the shard's partial: out normalized over the
// shard's visible keys and lse their log-sum-exp (0 and -inf where it sees none), which
// merge_partials folds with the other shards' into the result over the whole context.
struct Shard {
  const int32_t* key_offset;  // [batch], host
  const int32_t* total_len;   // [batch], host
};
Result decode_shard(const DecodeProblem& problem, const DecodeTensors& shard_tensors, const Shard& shard,
                    const Options& options = {});

// The log-sum-exp merge (fp64, in the order given) of decode partials over disjoint key sets, each
// in decode's layout: out [B, q_len, Hq, D], lse [B, Hq, q_len].
Result merge_decode_partials(const std::vector<Result>& partials, const DecodeProblem& problem);
// Prefill over K/V token tensors, or (problem.kv_cache) a chunk of queries over a decode cache in
// any format decode reads (the values the cache stands for), causal aligned bottom-right.
Result prefill(const PrefillProblem& problem, const PrefillTensors& tensors, const Options& options = {});

}  // namespace splitkv::ref
