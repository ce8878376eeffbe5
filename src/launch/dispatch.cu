// Type-erased launchers: (dtype, head dim) -> the instantiation compiled in its own file.
#include "launch/instances.hpp"
#include "launch/with_instance.hpp"

namespace splitkv::detail {

cudaError_t launch_decode(DType dtype, int head_dim, tiles::DecodePipeline pipeline, const DecodeParams& params,
                          const LaunchConfig& config) {
  return with_instance(dtype, head_dim, [&](auto element, auto dim) {
    using Element = decltype(element);
    constexpr int kHeadDim = decltype(dim)::value;
    if constexpr (tiles::has_deep_decode_pipeline(kHeadDim)) {
      if (pipeline == tiles::DecodePipeline::kDeep) {
        return launch_decode_instance<Element, kHeadDim, tiles::DecodePipeline::kDeep>(params, config);
      }
    }
    return launch_decode_instance<Element, kHeadDim, tiles::DecodePipeline::kShallow>(params, config);
  });
}

}  // namespace splitkv::detail
