// Launcher of one combine instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/combine/combine_kernel.cuh"
#include "launch/launch_kernel.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim>
cudaError_t launch_combine(const CombineParams& params, const LaunchConfig& config) {
  return launch_kernel(combine_kernel<Element, kHeadDim>, dim3(tiles::kCombineThreads), 0, params, config);
}

}  // namespace splitkv::detail
