// The combine kernel is small: all its instantiations live in this one file.
#include "kernels/combine/combine_kernel.cuh"
#include "launch/launch_kernel.cuh"
#include "launch/with_instance.hpp"

namespace splitkv::detail {

cudaError_t launch_combine(DType dtype, int head_dim, const CombineParams& params, const LaunchConfig& config) {
  return with_instance(dtype, head_dim, [&](auto element, auto dim) {
    const dim3 grid(static_cast<unsigned>((params.rows + kCombineWarps - 1) / kCombineWarps));
    return launch_kernel(combine_kernel<decltype(element), decltype(dim)::value>, grid, dim3(kCombineWarps * 32),
                         0, params, config);
  });
}

}  // namespace splitkv::detail
