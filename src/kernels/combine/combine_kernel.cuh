// The split-KV combine kernels (kernels/combine/combine_row.cuh has the math and its fixed order):
// rows of at most one chunk of splits (kMergeChunk = 8) by combine_kernel, head_dim / 4 threads
// per row and CombineLanes::kRowsPerBlock rows per block; rows of more by combine_teams_kernel, a
// block per row of p.split_groups teams of head_dim / 4 threads, one chunk per team and round.
#pragma once

#include "kernels/combine/combine_row.cuh"
#include "kernels/common/pdl.cuh"

namespace splitkv::detail {

// Both kernels wait for the partials from the kernel before them, and only then let their
// dependents launch: allowed before the wait, the next call's split blocks could take SM slots
// while this call's split kernel still runs (docs/TUNING.md, "Kernels").

// Eight resident blocks per SM (at most 64 registers, no spill at D=128): left alone, the eight
// partials' 64-bit addresses took 120 registers and four blocks per SM. p.num_splits <= 8.
// kCallerPartials: partials from run_combine's caller (ContiguousPartials). kSinks: p.sinks folded
// into every row (combine_row).
template <class Element, int kHeadDim, bool kCallerPartials = false, bool kSinks = false>
__global__ void __launch_bounds__(tiles::kCombineThreads, 8) combine_kernel(const __grid_constant__ CombineParams p) {
  wait_for_prior_grids();
  allow_dependent_launch();
  using Lanes = CombineLanes<kHeadDim>;
  const int64_t row = int64_t(blockIdx.x) * Lanes::kRowsPerBlock + threadIdx.x / Lanes::kPerRow;
  if (row >= p.rows) return;
  combine_row<Element, kHeadDim, true, kSinks>(p, row, threadIdx.x % Lanes::kPerRow,
                                       ContiguousPartials<kHeadDim, kCallerPartials>{p.partial_o, p.partial_lse, p.rows});
}

// One row per block, p.split_groups teams of head_dim / 4 threads (tiles::combine_split_groups:
// at most tiles::kCombineTeamsMaxThreads). Its grids are small (rows of more than 8 splits), so
// registers go to the chunk in flight beside the running state (64 at D=128) rather than to
// occupancy.
template <class Element, int kHeadDim, bool kCallerPartials = false, bool kSinks = false>
__global__ void __launch_bounds__(tiles::kCombineTeamsMaxThreads)
    combine_teams_kernel(const __grid_constant__ CombineParams p) {
  wait_for_prior_grids();
  allow_dependent_launch();
  constexpr int kPerRow = CombineLanes<kHeadDim>::kPerRow;
  __shared__ ChunkSlot exchange[tiles::kCombineTeamsMaxThreads];
  combine_row_in_groups<Element, kHeadDim, kSinks>(
      p, blockIdx.x, threadIdx.x % kPerRow, threadIdx.x / kPerRow, exchange,
      ContiguousPartials<kHeadDim, kCallerPartials>{p.partial_o, p.partial_lse, p.rows});
}

}  // namespace splitkv::detail
