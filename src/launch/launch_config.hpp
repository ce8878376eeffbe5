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
};

// Shared memory the runtime reserves per resident block (sm_80+).
constexpr int kReservedSmemPerBlock = 1024;

// Dynamic shared memory to launch `blocks` blocks of `smem_bytes` with, on a device of `sm_count`
// SMs of `smem_per_sm` bytes each. A grid of no more blocks than SMs is planned as one block per SM,
// but the block scheduler puts a second block on an SM whenever one fits, and it does: where the
// previous kernel's blocks (launched ahead of ours by programmatic dependent launch) still hold some
// SMs, it doubles up on the free ones (bench/NOTES.md, run 52: 17 of 128 SMs took two blocks of a
// routed decode, whose blocks there ran 12% slower, the launch 10%). Asking for more than half an
// SM's shared memory leaves no room for a second block. Only for the streaming kernels (more than
// the 48 KB a block gets without opting in; the small helpers keep their size) and not for clusters,
// which the scheduler places GPC by GPC.
constexpr int spread_smem_bytes(int smem_bytes, long long blocks, int sm_count, int smem_per_sm, int cluster_blocks) {
  if (smem_bytes <= 48 * 1024 || cluster_blocks > 1 || blocks > sm_count) return smem_bytes;
  const int more_than_half = (smem_per_sm / 2 - kReservedSmemPerBlock + 1 + 127) / 128 * 128;
  return smem_bytes < more_than_half ? more_than_half : smem_bytes;
}

}  // namespace splitkv::detail
