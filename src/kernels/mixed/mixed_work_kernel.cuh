// The mixed step's work-list builder (mixed_work_params.hpp): one block of kMixedWorkThreads.
// Thread t takes a contiguous run of sequences, counts their units on each side (prefill tiles and
// kBad units; decode splits), a block-wide scan gives each thread its first rank on each side in
// sequence order, and each unit is written at its interleave_position: the same list, unit for
// unit, as the host's plan::mixed_work_list.
#pragma once

#include <cstdint>

#include "kernels/common/mixed_work.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/mixed/mixed_work_params.hpp"

namespace splitkv::detail {

// Inclusive sums over the block of each thread's two counts (Hillis-Steele in shared memory).
__device__ __forceinline__ void block_inclusive_sums(long long (&sums)[2][kMixedWorkThreads], long long mine_prefill,
                                                     long long mine_decode) {
  const int t = threadIdx.x;
  sums[0][t] = mine_prefill;
  sums[1][t] = mine_decode;
  __syncthreads();
  for (int offset = 1; offset < kMixedWorkThreads; offset *= 2) {
    const long long add0 = t >= offset ? sums[0][t - offset] : 0;
    const long long add1 = t >= offset ? sums[1][t - offset] : 0;
    __syncthreads();
    sums[0][t] += add0;
    sums[1][t] += add1;
    __syncthreads();
  }
}

template <class Element>  // unused: the registry instantiates every family at its dtypes
__global__ void __launch_bounds__(kMixedWorkThreads) mixed_work_kernel(const __grid_constant__ MixedWorkParams p) {
  wait_for_prior_grids();  // the lengths may be a kernel's before
  const int t = threadIdx.x;
  const int per_thread = (p.batch + kMixedWorkThreads - 1) / kMixedWorkThreads;
  const int b_begin = min(p.batch, t * per_thread);
  const int b_end = min(p.batch, b_begin + per_thread);

  // This thread's units of each side: the prefill side (tiles, kBad units) and decode splits.
  long long mine_prefill = 0, mine_decode = 0;
  for (int b = b_begin; b < b_end; ++b) {
    const MixedSequence m = mixed_sequence(p.shape, p.cu_seqlens_q, p.seq_lens, b);
    const int units = mixed_sequence_units(p.shape, m);
    if (m.decode) {
      mine_decode += units;
    } else {
      mine_prefill += units;
    }
  }
  __shared__ long long sums[2][kMixedWorkThreads];
  block_inclusive_sums(sums, mine_prefill, mine_decode);
  const long long prefill = sums[0][kMixedWorkThreads - 1], decode = sums[1][kMixedWorkThreads - 1];
  long long rank_prefill = sums[0][t] - mine_prefill, rank_decode = sums[1][t] - mine_decode;  // first units

  for (int b = b_begin; b < b_end; ++b) {
    const MixedSequence m = mixed_sequence(p.shape, p.cu_seqlens_q, p.seq_lens, b);
    const int units = mixed_sequence_units(p.shape, m);
    for (int k = 0; k < units; ++k) {
      const long long rank = m.decode ? rank_decode++ : rank_prefill++;
      const long long at = interleave_position(rank, m.decode, prefill, decode);
      if (at < p.capacity) p.units[at] = mixed_unit(p.shape, m, b, k);
    }
  }
  if (t == 0) *p.count = prefill + decode <= p.capacity ? prefill + decode : -1;
  allow_dependent_launch();
}

}  // namespace splitkv::detail
