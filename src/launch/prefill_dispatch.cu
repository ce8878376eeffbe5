// Prefill kernels are not implemented yet: every prefill launch reports cudaErrorNotSupported.
#include "launch/launch_config.hpp"

namespace splitkv::detail {

cudaError_t launch_prefill(DType, int, tiles::PrefillKernel, const PrefillParams&, const LaunchConfig&) {
  return cudaErrorNotSupported;
}

}  // namespace splitkv::detail
