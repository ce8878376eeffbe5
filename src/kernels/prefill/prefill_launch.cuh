// Launcher of one prefill_mma* instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/prefill/prefill_kernel.cuh"
#include "kernels/prefill/prefill_splitv_kernel.cuh"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim, tiles::PrefillVariant kVariant>
cudaError_t launch_prefill_mma(const PrefillParams& params, const LaunchConfig& config) {
  using Traits = PrefillTraits<Element, kHeadDim, kVariant>;
  const dim3 block(Traits::kThreads);
  // The study variants (split-V, two-pass) have no variants instance: the planner keeps them off.
  if ((kVariant == tiles::PrefillVariant::kSplitV || kVariant == tiles::PrefillVariant::kTwoPass) &&
      prefill_variants(params)) {
    return cudaErrorInvalidValue;
  }
  if constexpr (kVariant == tiles::PrefillVariant::kSplitV) {
    return launch_kernel(prefill_splitv_kernel<Traits>, block, Traits::kSmemBytes, params, config);
  } else if constexpr (kVariant == tiles::PrefillVariant::kTwoPass) {
    return launch_two_pass(prefill_kernel<Traits, PrefillPass::kStats>, prefill_kernel<Traits, PrefillPass::kFromStats>,
                           block, Traits::kSmemBytes, params, config);
  } else {
    if (prefill_variants(params)) {
      return params.softcap > 0.f
                 ? launch_kernel(prefill_kernel<Traits, PrefillPass::kFused, true, true>, block, Traits::kSmemBytes,
                                 params, config)
                 : launch_kernel(prefill_kernel<Traits, PrefillPass::kFused, true, false>, block, Traits::kSmemBytes,
                                 params, config);
    }
    return launch_kernel(prefill_kernel<Traits, PrefillPass::kFused>, block, Traits::kSmemBytes, params, config);
  }
}

}  // namespace splitkv::detail
