// The split-KV combine kernel: each block merges the partials of CombineLanes::kRowsPerBlock
// output rows, head_dim / 4 threads per row (kernels/combine/combine_row.cuh has the math and its
// fixed order).
#pragma once

#include "kernels/combine/combine_row.cuh"
#include "kernels/common/pdl.cuh"

namespace splitkv::detail {

// Eight resident blocks per SM (at most 64 registers, no spill at D=128): left alone, the eight
// partials' 64-bit addresses took 120 registers and four blocks per SM.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(tiles::kCombineThreads, 8) combine_kernel(const __grid_constant__ CombineParams p) {
  wait_for_prior_grids();    // the partials come from the kernel before us
  // Only now may our dependents launch: allowed before the wait, the next call's split blocks
  // could take SM slots while this call's split kernel still runs. Run 36 (bench/NOTES.md): B=8
  // 28/4 8k causal q_len 2 38.4 us against 40.6-41.7, q_len 4 48.1 against 49.7; others equal.
  allow_dependent_launch();
  using Lanes = CombineLanes<kHeadDim>;
  const int64_t row = int64_t(blockIdx.x) * Lanes::kRowsPerBlock + threadIdx.x / Lanes::kPerRow;
  if (row >= p.rows) return;
  combine_row<Element, kHeadDim>(p, row, threadIdx.x % Lanes::kPerRow,
                                 ContiguousPartials<kHeadDim>{p.partial_o, p.partial_lse, p.rows});
}

}  // namespace splitkv::detail
