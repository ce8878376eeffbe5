// Argument validation at the API boundary. Every failure names the argument and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>

#include "splitkv/plan.hpp"
#include "splitkv/problem.hpp"
#include "splitkv/status.hpp"

namespace splitkv::detail {

// Shape-level checks (no pointers): sizes, GQA ratio, head dim, dtype, KV format, page size,
// scale. What depends on the kernel family (head dims it serves, grid limits) is the planner's.
Status validate_decode_problem(const DecodeProblem& problem);
Status validate_prefill_problem(const PrefillProblem& problem);
// The planner's description of the GPU: positive SM count and shared-memory sizes (a block's
// opt-in maximum within an SM's), a non-negative L2 size, a compute capability major.minor.
Status validate_device_info(const DeviceInfo& device);

// Tensor bindings against the problem: ranks, shapes, dtypes, null and misaligned pointers,
// contiguous last dims; and, where host copies are given, lengths and page ids.
Status validate_decode_tensors(const DecodeProblem& problem, const DecodeTensors& tensors);
Status validate_prefill_tensors(const PrefillProblem& problem, const PrefillTensors& tensors);

// Tensors of run_combine against its problem.
// The caller's workspace against the `required` bytes of its plan (nothing needed when 0): present,
// 16-byte aligned, large enough.
Status validate_workspace(size_t required, const void* workspace, size_t workspace_bytes);
// The caller's partial outputs of a decode (when given) against the plan's split count.
Status validate_decode_partials(const DecodeProblem& problem, int num_splits, const DecodeTensors& tensors);
Status validate_combine(const CombineProblem& problem, const CombineTensors& tensors);

// Keys the KV tensors can hold per sequence (contiguous: k.shape[1]; paged: pages per sequence
// in the block table times page_size).
int64_t decode_kv_capacity(const DecodeProblem& problem, const DecodeTensors& tensors);

}  // namespace splitkv::detail
