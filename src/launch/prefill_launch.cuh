// Launcher of one prefill instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/prefill/prefill_kernel.cuh"
#include "kernels/prefill/prefill_splitv_kernel.cuh"
#include "launch/launch_kernel.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim, tiles::PrefillKernel kKernel>
cudaError_t launch_prefill_instance(const PrefillParams& params, const LaunchConfig& config) {
  using Traits = PrefillTraits<Element, kHeadDim, kKernel>;
  const dim3 grid((params.max_q_len + Traits::kBlockM - 1) / Traits::kBlockM, params.num_q_heads,
                  params.batch * params.num_splits);
  const dim3 block(Traits::kThreads);
  if constexpr (kKernel == tiles::PrefillKernel::kSplitV) {
    return launch_kernel(prefill_splitv_kernel<Traits>, grid, block, Traits::kSmemBytes, params, config);
  } else if constexpr (kKernel == tiles::PrefillKernel::kTwoPass) {
    // Statistics first, then the output pass; the row statistics cross through the workspace.
    if (cudaError_t e = launch_kernel(prefill_kernel<Traits, PrefillPass::kStats>, grid, block, Traits::kSmemBytes,
                                      params, config);
        e != cudaSuccess) {
      return e;
    }
    return launch_kernel(prefill_kernel<Traits, PrefillPass::kFromStats>, grid, block, Traits::kSmemBytes, params,
                         config);
  } else {
    return launch_kernel(prefill_kernel<Traits, PrefillPass::kFused>, grid, block, Traits::kSmemBytes, params, config);
  }
}

}  // namespace splitkv::detail
