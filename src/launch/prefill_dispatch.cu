// (dtype, head dim, prefill kernel) -> the instantiation compiled in its own file.
#include "launch/instances.hpp"
#include "launch/with_instance.hpp"

namespace splitkv::detail {

cudaError_t launch_prefill(DType dtype, int head_dim, tiles::PrefillKernel kernel, const PrefillParams& params,
                           const LaunchConfig& config) {
  return with_instance<128>(dtype, head_dim, [&](auto element, auto dim) {
    using Element = decltype(element);
    constexpr int kHeadDim = decltype(dim)::value;
    switch (kernel) {
      case tiles::PrefillKernel::kDefault:
        return launch_prefill_instance<Element, kHeadDim, tiles::PrefillKernel::kDefault>(params, config);
      case tiles::PrefillKernel::kFoundingTiles:
        return launch_prefill_instance<Element, kHeadDim, tiles::PrefillKernel::kFoundingTiles>(params, config);
      case tiles::PrefillKernel::kSplitV:
        return launch_prefill_instance<Element, kHeadDim, tiles::PrefillKernel::kSplitV>(params, config);
      case tiles::PrefillKernel::kTwoPass:
        return launch_prefill_instance<Element, kHeadDim, tiles::PrefillKernel::kTwoPass>(params, config);
    }
    return cudaErrorInvalidValue;
  });
}

}  // namespace splitkv::detail
