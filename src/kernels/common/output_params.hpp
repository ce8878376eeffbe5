// Where a kernel's rows go (plain data, filled on the host): the explicit output-mode switch every
// kernel's parameters carry, read by the one epilogue (kernels/common/epilogue.cuh).
#pragma once

#include <cstdint>

namespace splitkv::detail {

enum class OutputMode : int32_t {
  kFinal,    // normalized O in the Q/O dtype (and LSE when requested)
  kPartial,  // fp32 O_i and LSE_i of this split, for a combine step (split-KV, shards of a cache)
  kAtomic,   // decode, opt-in: exp(LSE_i - reference_lse) * O_i added into atomic_o (and the weight
             // into atomic_sum) with atomic adds when |LSE_i - reference_lse| <= kAtomicLseRange;
             // otherwise (far from the reference, empty, or poisoned) the kPartial write, and an
             // atomically added split leaves LSE -inf in its partial slot (O not written)
};

// The band around the reference LSE whose splits add atomically: their weights stay within
// [e^-40, e^40], far from fp32 overflow and underflow whatever the number of splits.
constexpr float kAtomicLseRange = 40.f;

struct OutputParams {
  OutputMode mode;

  // kFinal: query i of sequence b, head h is out + b * o_batch_stride + token * o_token_stride
  // + h * o_head_stride, token = i (+ the sequence's offset in a varlen batch). LSE is optional.
  void* out;
  int64_t o_batch_stride, o_token_stride, o_head_stride;
  float* lse;
  int64_t lse_batch_stride, lse_head_stride, lse_token_stride;

  // kPartial: row (b * seq_rows + i) * num_heads + h of split s is
  // partial_o[(s * partial_rows + row) * head_dim ...] and partial_lse[s * partial_rows + row].
  float* partial_o;
  float* partial_lse;
  int64_t partial_rows;
  int seq_rows;  // query rows per sequence slot (decode: q_len; prefill: max_q_len)
  int num_heads;

  // kAtomic (besides the kPartial fields, the fallback): fp32 [partial_rows, head_dim] and
  // [partial_rows], zero before the launch; the normalization kernel reads and re-zeroes them.
  float* atomic_o;
  float* atomic_sum;
  float reference_lse;
};

}  // namespace splitkv::detail
