// The mixed step's work-list builder (mixed_work_params.hpp): one block of kMixedWorkThreads.
// Thread t takes a contiguous run of sequences, counts their units on each side (prefill tiles and
// kBad units; decode splits), a block-wide prefix sum per side (block_scan.cuh) gives each thread
// its first rank on that side in sequence order, and each unit is written at its
// interleave_position: the same list, unit for unit, as the host's plan::mixed_work_list.
#pragma once

#include <cstdint>

#include "kernels/common/block_scan.cuh"
#include "kernels/common/mixed_work.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/mixed/mixed_work_params.hpp"

namespace splitkv::detail {

template <class Element>  // unused: the registry instantiates every family at its dtypes
__global__ void __launch_bounds__(kMixedWorkThreads) mixed_work_kernel(const __grid_constant__ MixedWorkParams p) {
  wait_for_prior_grids();  // the lengths may be a kernel's before
  const int t = threadIdx.x;
  const int per_thread = (p.batch + kMixedWorkThreads - 1) / kMixedWorkThreads;
  const int b_begin = min(p.batch, t * per_thread);
  const int b_end = min(p.batch, b_begin + per_thread);

  // This thread's units of each side: the prefill side (tiles, kBad units) and decode splits.
  int64_t mine_prefill = 0, mine_decode = 0;
  for (int b = b_begin; b < b_end; ++b) {
    const MixedSequence m = mixed_sequence(p.shape, p.cu_seqlens_q, p.seq_lens, b);
    const int units = mixed_sequence_units(p.shape, m);
    if (m.decode) {
      mine_decode += units;
    } else {
      mine_prefill += units;
    }
  }
  __shared__ int64_t warp_sums[kMixedWorkThreads / 32];
  int64_t prefill, decode;  // the step's units on each side
  int64_t rank_prefill = block_exclusive_sum<kMixedWorkThreads>(mine_prefill, warp_sums, &prefill);  // first units
  int64_t rank_decode = block_exclusive_sum<kMixedWorkThreads>(mine_decode, warp_sums, &decode);

  for (int b = b_begin; b < b_end; ++b) {
    const MixedSequence m = mixed_sequence(p.shape, p.cu_seqlens_q, p.seq_lens, b);
    const int units = mixed_sequence_units(p.shape, m);
    for (int k = 0; k < units; ++k) {
      const int64_t rank = m.decode ? rank_decode++ : rank_prefill++;
      const int64_t at = interleave_position(rank, m.decode, prefill, decode);
      if (at < p.capacity) p.units[at] = mixed_unit(p.shape, m, b, k);
    }
  }
  if (t == 0) *p.count = prefill + decode <= p.capacity ? prefill + decode : -1;
  allow_dependent_launch();
}

}  // namespace splitkv::detail
