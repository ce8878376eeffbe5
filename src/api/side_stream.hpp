// A second stream for work a call runs beside the caller's stream (the mixed route's prefill
// part): forked from the caller's stream by an event and joined back by another, so the call stays
// ordered on the caller's stream and capturable into a CUDA graph (the side stream joins the
// capture through the fork's event). The side stream has the device's greatest priority: where
// both streams have blocks waiting, the side stream's go to the SMs first (a graph captured from
// it keeps that priority where it is instantiated with cudaGraphInstantiateFlagUseNodePriority, as
// PyTorch's graphs are).
#pragma once

#include <cuda_runtime_api.h>

#include "splitkv/status.hpp"

namespace splitkv::detail {

struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t forked = nullptr, joined = nullptr;
};

// The calling thread's side stream and events on the current device (made on first use), with
// the side stream ordered after the work queued so far on `main`.
Status fork_side_stream(cudaStream_t main, SideStream* side);

// `main` waits for the work queued on the side stream.
Status join_side_stream(cudaStream_t main, const SideStream& side);

}  // namespace splitkv::detail
