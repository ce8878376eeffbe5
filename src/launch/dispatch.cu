// Type-erased launchers: (dtype, head dim) -> the instantiation compiled in its own file.
#include "launch/instances.hpp"
#include "launch/with_instance.hpp"

namespace splitkv::detail {

cudaError_t launch_decode(DType dtype, int head_dim, const DecodeParams& params, const LaunchConfig& config) {
  return with_instance(dtype, head_dim, [&](auto element, auto dim) {
    return launch_decode_instance<decltype(element), decltype(dim)::value>(params, config);
  });
}

}  // namespace splitkv::detail
