// Declarations of the per-(dtype, head dim) launchers defined in the generated instantiation
// files (build/generated/instantiations/*.cu). Only the combinations this build holds exist.
#pragma once

#include "launch/launch_config.hpp"

namespace splitkv::detail {

template <class Element, int kHeadDim>
cudaError_t launch_decode_instance(const DecodeParams& params, const LaunchConfig& config);

template <class Element, int kHeadDim, tiles::PrefillKernel kKernel>
cudaError_t launch_prefill_instance(const PrefillParams& params, const LaunchConfig& config);

}  // namespace splitkv::detail
