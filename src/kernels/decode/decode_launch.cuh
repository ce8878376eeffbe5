// Launcher of one decode_mma instantiation; included only by the generated instantiation files.
#pragma once

#include "kernels/decode/decode_kernel.cuh"
#include "kernels/decode/decode_stream_kernel.cuh"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {

template <class Element, int kHeadDim, int kBlockM>
cudaError_t launch_decode_mma(const DecodeParams& params, const LaunchConfig& config) {
  using Traits = DecodeTraits<Element, kHeadDim, kBlockM>;
  constexpr int kStreamBlocks = tiles::decode_stream_blocks_per_sm(Traits::kTile);
  // A persistent grid is the stream kernel's alone (a tile without one has none).
  if (kStreamBlocks == 0 && config.persistent_blocks > 0) return cudaErrorInvalidConfiguration;
  // The stream kernel in the block kernel's place (PlanTuning::decode_stream): a persistent grid of
  // one-warp blocks over the same one-split plans.
  if constexpr (kStreamBlocks > 0) {
    if (config.persistent_blocks > 0) {
      if (!decode_uncapped_variants(params) || params.num_splits.divisor != 1 || params.cluster_combine ||
          params.tile_counters != nullptr || params.output.mode != OutputMode::kFinal || config.cluster_blocks > 1 ||
          int64_t(params.batch) * params.num_kv_heads * params.m_tiles.divisor > INT32_MAX) {
        return cudaErrorInvalidConfiguration;  // not a plan the planner gives the stream kernel
      }
      using One = DecodeTraits<Element, kHeadDim, kBlockM, 1, false>;
      constexpr int kBound = tiles::decode_stream_launch_bound(Traits::kTile);
      auto* stream = params.sinks == nullptr ? decode_stream_kernel<One, 1, kBound, false>
                                             : decode_stream_kernel<One, 1, kBound, true>;
      return launch_kernel(stream, dim3(32), kStreamWarpSmemBytes<One>, params, config);
    }
  }
  // The plan counts on the variants instance's twin for short blocks (fewer warps).
  if constexpr (Traits::kShortTwinWarps > 0) {
    // Its version for one-split plans: no cluster inbox, register-bound for more blocks.
    if (decode_uncapped_variants(params) && config.short_twin_warps == Traits::kShortTwinWarps &&
        config.register_bound_blocks == Traits::kShortTwinBoundBlocks) {
      if (params.cluster_combine || params.tile_counters != nullptr || config.cluster_blocks > 1) {
        return cudaErrorInvalidConfiguration;  // a plan that merges splits never asks for it
      }
      using Twin = DecodeTraits<Element, kHeadDim, kBlockM, Traits::kShortTwinWarps, false>;
      constexpr int kBound = Traits::kShortTwinBoundBlocks;
      auto* twin = params.sinks == nullptr ? decode_kernel<Twin, true, false, kBound, false>
                                           : decode_kernel<Twin, true, false, kBound>;
      return launch_kernel(twin, dim3(Twin::kThreads), Twin::kSmemBytes, params, config);
    }
    if (decode_uncapped_variants(params) && config.short_twin_warps == Traits::kShortTwinWarps) {
      using Twin = DecodeTraits<Element, kHeadDim, kBlockM, Traits::kShortTwinWarps>;
      auto* twin = params.sinks == nullptr ? decode_kernel<Twin, true, false, 0, false> : decode_kernel<Twin, true, false>;
      return launch_kernel(twin, dim3(Twin::kThreads), Twin::kSmemBytes, params, config);
    }
  }
  auto* kernel = !decode_variants(params)    ? decode_kernel<Traits, false>
                 : decode_softcap_on(params) ? decode_kernel<Traits, true, true>
                 : params.sinks == nullptr   ? decode_kernel<Traits, true, false, 0, false>
                                             : decode_kernel<Traits, true, false>;
  // The plan counts on the resident blocks of the variants instance's register-bound twin.
  if constexpr (Traits::kBoundVariantsBlocks > 0) {
    if (decode_uncapped_variants(params) && config.register_bound_blocks == Traits::kBoundVariantsBlocks) {
      kernel = decode_kernel<Traits, true, false, Traits::kBoundVariantsBlocks>;
    }
  }
  return launch_kernel(kernel, dim3(Traits::kThreads), Traits::kSmemBytes, params, config);
}

}  // namespace splitkv::detail
