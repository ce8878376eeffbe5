// The epilogue every kernel writes its rows through: a final row (O converted to the Q/O dtype,
// LSE), or a split's partial (fp32 O_i, LSE_i), as OutputParams::mode says; and NaN instead of
// either when the block saw invalid device data (a length or page id the host could not check),
// so a bad input shows up in its own rows instead of as a wrong answer.
#pragma once

#include <cutlass/array.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/output_params.hpp"

namespace splitkv::detail {

// Identity of one output row.
struct OutputRow {
  int b;          // sequence slot
  int i;          // query index within the sequence
  int64_t token;  // token index in the output tensor (i, plus the sequence's offset when varlen)
  int head;       // query head
  int split;      // KV split (partials only)
};

constexpr float kOutputNaN = __builtin_nanf("");

// kFinal: where a row's output starts and where its LSE goes (OutputParams).
template <class Element>
__device__ __forceinline__ Element* final_row(const OutputParams& o, int b, int head, int64_t token) {
  return static_cast<Element*>(o.out) + b * o.o_batch_stride + token * o.o_token_stride + head * o.o_head_stride;
}
__device__ __forceinline__ float& final_lse(const OutputParams& o, int b, int head, int64_t token) {
  return o.lse[b * o.lse_batch_stride + head * o.lse_head_stride + token * o.lse_token_stride];
}

// kN output columns as the output dtype, NaN where poisoned: what one store of a final row writes.
template <class Element, int kN>
__device__ __forceinline__ cutlass::Array<Element, kN> final_values(const float (&v)[kN], bool poisoned) {
  cutlass::Array<Element, kN> packed;
#pragma unroll
  for (int j = 0; j < kN; ++j) packed[j] = Element(poisoned ? kOutputNaN : v[j]);
  return packed;
}

// kPartial: the row index of a split's partial (OutputParams).
__device__ __forceinline__ int64_t partial_row(const OutputParams& o, const OutputRow& r) {
  return int64_t(r.split) * o.partial_rows + (int64_t(r.b) * o.seq_rows + r.i) * o.num_heads + r.head;
}

// Writes kN consecutive columns [col, col + kN) of a row (kN of 2 or 4: one 4- or 8-byte store of
// the dtype, or 8/16 bytes of fp32), and the row's LSE when write_lse.
template <class Element, int kHeadDim, int kN>
__device__ __forceinline__ void write_output(const OutputParams& o, const OutputRow& r, int col, const float (&v)[kN],
                                             float lse, bool write_lse, bool poisoned) {
  static_assert(kN == 2 || kN == 4);
  if (o.mode == OutputMode::kFinal) {
    *reinterpret_cast<cutlass::Array<Element, kN>*>(final_row<Element>(o, r.b, r.head, r.token) + col) =
        final_values<Element>(v, poisoned);
    if (write_lse && o.lse != nullptr) final_lse(o, r.b, r.head, r.token) = poisoned ? kOutputNaN : lse;
    return;
  }
  const int64_t row = partial_row(o, r);
  // Every thread of a row computes the same LSE, so the whole row takes the same path.
  if (o.mode == OutputMode::kAtomic && !poisoned && fabsf(lse - o.reference_lse) <= kAtomicLseRange) {
    const int64_t merged_row = row - int64_t(r.split) * o.partial_rows;
    const float w = expf(lse - o.reference_lse);
#pragma unroll
    for (int j = 0; j < kN; ++j) atomicAdd(o.atomic_o + merged_row * kHeadDim + col + j, w * v[j]);
    if (write_lse) {
      atomicAdd(o.atomic_sum + merged_row, w);
      o.partial_lse[row] = kNegInf;  // this split is in the atomic sum; its O slot is not read
    }
    return;
  }
  float* dst = o.partial_o + row * kHeadDim + col;
  if constexpr (kN == 4) {
    *reinterpret_cast<float4*>(dst) = poisoned ? make_float4(kOutputNaN, kOutputNaN, kOutputNaN, kOutputNaN)
                                               : make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *reinterpret_cast<float2*>(dst) = poisoned ? make_float2(kOutputNaN, kOutputNaN) : make_float2(v[0], v[1]);
  }
  if (write_lse) o.partial_lse[row] = poisoned ? kOutputNaN : lse;
}

}  // namespace splitkv::detail
