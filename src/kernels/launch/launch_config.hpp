// How a kernel is launched (no CuTe, no CUTLASS: safe to include from host-only code paths).
#pragma once

#include <cuda_runtime_api.h>

namespace splitkv::detail {

struct LaunchConfig {
  unsigned grid[3] = {1, 1, 1};  // from the plan (Plan::grid), or the combine's rows
  cudaStream_t stream = nullptr;
  bool use_pdl = false;    // programmatic dependent launch (sm_90+)
  int cluster_blocks = 1;  // > 1: launch clusters of this many blocks along x (sm_90+)
  // > 0: launch this many blocks (x only), which walk `grid` as a list of tiles (Plan::persistent_blocks)
  int persistent_blocks = 0;
  // > the kernel's own: shared memory per block to ask for (caps the blocks an SM holds; see
  // Plan::launch_smem_bytes).
  int min_smem_bytes = 0;
  // > 0: launch the kernel's variants instance register-bound for this many resident blocks per SM
  // where it has one (Plan::register_bound_blocks).
  int register_bound_blocks = 0;
  // > 0: launch the kernel's variants instance in its twin for short blocks with this many warps
  // where it has one (Plan::short_twin_warps).
  int short_twin_warps = 0;
};

}  // namespace splitkv::detail
