// Programmatic dependent launch (sm_90+): lets a kernel's launch overlap the tail of the kernel
// before it in the stream. Both are no-ops on older architectures, where kernels are launched
// without the attribute.
#pragma once

namespace splitkv::detail {

// Blocks until the grids this one depends on have completed and their writes are visible.
// Must precede the first read of anything a previous kernel may have written.
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Allows the next kernel in the stream to start launching (it still waits for our completion
// before reading our results).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

}  // namespace splitkv::detail
