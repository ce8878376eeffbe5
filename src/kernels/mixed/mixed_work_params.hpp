// Parameters of a mixed step's work-list builder (kernels/common/mixed_work.hpp, docs/MIXED_BATCH.md,
// "The work list"): one block reads the device's cu_seqlens_q and seq_lens and writes the step's
// units in list order, so that a captured call rebuilds the list for each replay's lengths. Plain
// host/device struct, no CUDA types.
#pragma once

#include <cstdint>

#include "kernels/common/mixed_work.hpp"

namespace splitkv::detail {

struct MixedWorkParams {
  MixedShape shape;
  const int32_t* cu_seqlens_q = nullptr;  // [batch + 1], device memory
  const int32_t* seq_lens = nullptr;      // [batch], device memory
  int batch = 0;                          // <= shape.max_seqs
  MixedUnit* units = nullptr;             // [capacity]: the list, in order
  int64_t capacity = 0;                   // plan::mixed_max_units(shape)
  // [1]: the list's length, or -1 where the lengths would make more than `capacity` units (invalid
  // device data: sequences whose query ranges overlap past max_tokens); then only the units that
  // land inside the capacity are written, and the list's user runs none of it.
  int64_t* count = nullptr;
};

inline constexpr int kMixedWorkThreads = 1024;

}  // namespace splitkv::detail
