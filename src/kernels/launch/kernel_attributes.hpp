// Per-kernel function attributes, set once per (kernel, device) and never lowered. A kernel's
// dynamic shared memory limit is raised to the largest size any launch asked for so far, under one
// lock: two host threads launching one kernel with different sizes cannot interleave
// set / set / launch and fail the smaller-limit launch, and a CUDA graph captured with a large size
// still replays after a later call with a smaller one.
#pragma once

#include <cuda_runtime.h>

namespace splitkv::detail {

// Makes `kernel` accept `smem_bytes` of dynamic shared memory on the current device (a no-op when
// an earlier launch already raised it that far).
cudaError_t ensure_dynamic_smem(const void* kernel, int smem_bytes);

// Allows `kernel` clusters beyond the portable size of 8 blocks on the current device (once).
cudaError_t ensure_non_portable_clusters(const void* kernel);

}  // namespace splitkv::detail
