// The combine kernel is small: all its instantiations live in this one file.
#include "kernels/combine/combine_kernel.cuh"
#include "launch/launch_kernel.cuh"
#include "launch/with_instance.hpp"

namespace splitkv::detail {

cudaError_t launch_combine(DType dtype, int head_dim, const CombineParams& params, const LaunchConfig& config) {
  return with_instance(dtype, head_dim, [&](auto element, auto dim) {
    return launch_kernel(combine_kernel<decltype(element), decltype(dim)::value>,
                         dim3(static_cast<unsigned>(params.rows)), dim3(kCombineThreads), 0, params, config);
  });
}

}  // namespace splitkv::detail
