// Launcher of one decode_quant instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/decode_quant/quant_decode_keys_as_rows_kernel.cuh"
#include "kernels/decode_quant/quant_decode_kernel.cuh"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim, KvFormat kFormat>
cudaError_t launch_decode_quant(const DecodeParams& params, const LaunchConfig& config) {
  using Traits = DecodeQuantTraits<Element, kHeadDim, kFormat>;
  if (config.persistent_blocks > 0) return cudaErrorInvalidConfiguration;  // no persistent grid here
  // The plan counts on the variants instance's twin for short blocks (fewer warps).
  if constexpr (Traits::kShortTwinWarps > 0) {
    if (decode_uncapped_variants(params) && config.short_twin_warps == Traits::kShortTwinWarps) {
      using Twin = DecodeQuantTraits<Element, kHeadDim, kFormat, 16, Traits::kShortTwinWarps>;
      return launch_kernel(quant_decode_kernel<Twin, true, false>, dim3(Twin::kThreads), Twin::kSmemBytes, params,
                           config);
    }
  }
  auto* kernel = !decode_variants(params)    ? quant_decode_kernel<Traits, false>
                 : decode_softcap_on(params) ? quant_decode_kernel<Traits, true, true>
                                             : quant_decode_kernel<Traits, true, false>;
  return launch_kernel(kernel, dim3(Traits::kThreads), Traits::kSmemBytes, params, config);
}

template <class Element, int kHeadDim, KvFormat kFormat>
cudaError_t launch_decode_quant_keys_as_rows(const DecodeParams& params, const LaunchConfig& config) {
  using Traits = KeysAsRowsTraits<DecodeQuantTraits<Element, kHeadDim, kFormat, kKeysAsRowsQueries>>;
  if (config.persistent_blocks > 0) return cudaErrorInvalidConfiguration;  // no persistent grid here
  // The plan counts on the variants instance's twin for short blocks (fewer warps).
  if constexpr (Traits::kShortTwinWarps > 0) {
    if (decode_uncapped_variants(params) && config.short_twin_warps == Traits::kShortTwinWarps) {
      using Twin =
          KeysAsRowsTraits<DecodeQuantTraits<Element, kHeadDim, kFormat, kKeysAsRowsQueries, Traits::kShortTwinWarps>>;
      return launch_kernel(quant_decode_keys_as_rows_kernel<Twin, true, false>, dim3(Twin::kThreads), Twin::kSmemBytes,
                           params, config);
    }
  }
  auto* kernel = !decode_variants(params)    ? quant_decode_keys_as_rows_kernel<Traits, false>
                 : decode_softcap_on(params) ? quant_decode_keys_as_rows_kernel<Traits, true, true>
                                             : quant_decode_keys_as_rows_kernel<Traits, true, false>;
  return launch_kernel(kernel, dim3(Traits::kThreads), Traits::kSmemBytes, params, config);
}

}  // namespace splitkv::detail
