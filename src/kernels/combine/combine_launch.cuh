// Launcher of one combine instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/combine/combine_kernel.cuh"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim>
cudaError_t launch_combine(const CombineParams& params, const LaunchConfig& config) {
  // split_groups == 1 must mean one chunk of splits (combine_kernel folds only the first).
  static_assert(tiles::combine_max_split_groups(kHeadDim) >= 2);
  const dim3 teams(kHeadDim / 4 * params.split_groups), rows(tiles::kCombineThreads);
  if (params.caller_partials) {  // run_combine: the caller's empty partials may hold anything in O
    if (params.split_groups > 1) return launch_kernel(combine_teams_kernel<Element, kHeadDim, true>, teams, 0, params, config);
    return launch_kernel(combine_kernel<Element, kHeadDim, true>, rows, 0, params, config);
  }
  if (params.split_groups > 1) return launch_kernel(combine_teams_kernel<Element, kHeadDim>, teams, 0, params, config);
  return launch_kernel(combine_kernel<Element, kHeadDim>, rows, 0, params, config);
}

}  // namespace splitkv::detail
