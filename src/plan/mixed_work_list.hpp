// The host's copy of a mixed step's work list (kernels/common/mixed_work.hpp: the units, their
// order and the bound a plan sizes for), for the CPU backend and the tests; the GPU builds the same
// list in its captured call from the device's lengths.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/mixed_work.hpp"

namespace splitkv::plan {

// The most units any batch within the shape's bounds makes (what a plan sizes the list for).
int64_t mixed_max_units(const detail::MixedShape& shape);

// The list for `batch` sequences (<= shape.max_seqs): cu_seqlens_q [batch + 1], seq_lens [batch].
std::vector<detail::MixedUnit> mixed_work_list(const detail::MixedShape& shape, const int32_t* cu_seqlens_q,
                                               const int32_t* seq_lens, int batch);

}  // namespace splitkv::plan
