// Launcher of the atomic combine's normalization: one instance per (dtype, head dim), six in all,
// compiled for every configured architecture (the kernel is small).
#include <cutlass/numeric_types.h>

#include "kernels/combine/atomic_normalize_kernel.cuh"
#include "kernels/combine/atomic_normalize_params.hpp"
#include "kernels/launch/launch_kernel.cuh"

namespace splitkv::detail {
namespace {

template <class Element>
cudaError_t launch_for_dtype(const AtomicNormalizeParams& p, int head_dim, LaunchConfig config) {
  const int rows_per_block = kAtomicNormalizeThreads / (head_dim / 4);
  config.grid[0] = static_cast<unsigned>((p.combine.rows + rows_per_block - 1) / rows_per_block);
  config.grid[1] = config.grid[2] = 1;
  const dim3 block(kAtomicNormalizeThreads);
  switch (head_dim) {
    case 64: return launch_kernel(atomic_normalize_kernel<Element, 64>, block, 0, p, config);
    case 128: return launch_kernel(atomic_normalize_kernel<Element, 128>, block, 0, p, config);
    case 256: return launch_kernel(atomic_normalize_kernel<Element, 256>, block, 0, p, config);
  }
  return cudaErrorInvalidValue;  // validation admits no other head dim
}

}  // namespace

cudaError_t launch_atomic_normalize(const AtomicNormalizeParams& params, DType dtype, int head_dim,
                                    const LaunchConfig& config) {
  return dtype == DType::kF16 ? launch_for_dtype<cutlass::half_t>(params, head_dim, config)
                              : launch_for_dtype<cutlass::bfloat16_t>(params, head_dim, config);
}

}  // namespace splitkv::detail
