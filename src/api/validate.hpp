// Argument validation at the API boundary. Every failure names the argument and what was expected.
#pragma once

#include <cstdint>

#include "splitkv/problem.hpp"
#include "splitkv/status.hpp"

namespace splitkv::detail {

// Shape-level checks (no pointers): sizes, GQA ratio, head dim, dtype, page size, scale.
Status validate_decode_problem(const DecodeProblem& problem);
Status validate_prefill_problem(const PrefillProblem& problem);

// Tensor bindings against the problem: ranks, shapes, dtypes, null and misaligned pointers,
// contiguous last dims; and, where host copies are given, lengths and page ids.
Status validate_decode_tensors(const DecodeProblem& problem, const DecodeTensors& tensors);
Status validate_prefill_tensors(const PrefillProblem& problem, const PrefillTensors& tensors);

// Whether this build holds kernels for (dtype, head_dim): plans are device-independent, runs
// need the instantiation.
Status check_compiled(DType dtype, int head_dim);

// The softmax scale actually used: problem.softmax_scale, or 1/sqrt(head_dim) when it is 0.
float resolved_softmax_scale(float softmax_scale, int head_dim);

// Keys the KV tensors can hold per sequence (contiguous: k.shape[1]; paged: pages per sequence
// in the block table times page_size).
int64_t decode_kv_capacity(const DecodeProblem& problem, const DecodeTensors& tensors);

}  // namespace splitkv::detail
