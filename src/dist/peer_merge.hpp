// The peer merge of splitkv::dist (docs/CONTEXT_SHARDS.md): one kernel that waits at a barrier
// for every rank's shard partials, reads them straight from the ranks' symmetric NCCL windows
// (NVLink loads through NCCL's device API) in rank order, merges them exactly as the combine
// kernel does, and passes a second barrier so that no rank overwrites its partials while a peer
// still reads them. No NCCL collective and no copy of the partials.
#pragma once

#include <nccl.h>

#include "kernels/combine/combine_params.hpp"
#include "splitkv/types.hpp"

namespace splitkv::dist::detail {

struct PeerMergeParams {
  splitkv::detail::CombineParams combine;  // num_splits = ranks x splits_per_rank; partial_* unused
  const void* device_comm;                 // host pointer to the ncclDevComm (passed to the kernel by value)
  ncclWindow_t window;                     // each rank's partials at the same offsets of its window
  size_t lse_offset;                       // byte offset of LSE [splits, rows] (O [splits, rows, D] at 0)
  int splits_per_rank;
};

// A device communicator of comm with `barriers` LSA barriers (collective), on the heap; and its end.
ncclResult_t create_device_comm(ncclComm_t comm, int barriers, void** device_comm);
ncclResult_t destroy_device_comm(ncclComm_t comm, void* device_comm);

// grid = combine.rows blocks, block r uses barrier r (the device communicator must hold that many).
// cudaErrorInvalidValue for a dtype or head dim without an instantiation.
cudaError_t launch_peer_merge(const PeerMergeParams& params, DType dtype, int head_dim, cudaStream_t stream);

}  // namespace splitkv::dist::detail
