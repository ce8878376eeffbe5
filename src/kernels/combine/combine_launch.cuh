// Launcher of one combine instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/combine/combine_kernel.cuh"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {

// The kernels for one (caller partials, sinks) choice: the teams kernel for rows of more than one
// chunk of splits, the row kernel otherwise.
template <class Element, int kHeadDim, bool kCallerPartials, bool kSinks>
cudaError_t launch_combine_kernels(const CombineParams& params, const LaunchConfig& config) {
  const dim3 teams(kHeadDim / 4 * params.split_groups), rows(tiles::kCombineThreads);
  if (params.split_groups > 1) {
    return launch_kernel(combine_teams_kernel<Element, kHeadDim, kCallerPartials, kSinks>, teams, 0, params, config);
  }
  return launch_kernel(combine_kernel<Element, kHeadDim, kCallerPartials, kSinks>, rows, 0, params, config);
}

template <class Element, int kHeadDim>
cudaError_t launch_combine(const CombineParams& params, const LaunchConfig& config) {
  // split_groups == 1 must mean one chunk of splits (combine_kernel folds only the first).
  static_assert(tiles::combine_max_split_groups(kHeadDim) >= 2);
  // run_combine: the caller's empty partials may hold anything in O.
  const bool sinks = params.sinks != nullptr;
  if (params.caller_partials) {
    return sinks ? launch_combine_kernels<Element, kHeadDim, true, true>(params, config)
                 : launch_combine_kernels<Element, kHeadDim, true, false>(params, config);
  }
  return sinks ? launch_combine_kernels<Element, kHeadDim, false, true>(params, config)
               : launch_combine_kernels<Element, kHeadDim, false, false>(params, config);
}

}  // namespace splitkv::detail
