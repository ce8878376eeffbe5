#include "api/side_stream.hpp"

#include <string>

namespace splitkv::detail {
namespace {

constexpr int kMaxDevices = 64;

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::success();
  return Status(StatusCode::kCudaError, "stream", std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

Status fork_side_stream(cudaStream_t main, SideStream* side) {
  // One per thread and device: calls from several host threads never share the events.
  thread_local SideStream made[kMaxDevices];
  int device = 0;
  if (Status s = cuda_status(cudaGetDevice(&device), "cudaGetDevice"); !s) return s;
  if (device < 0 || device >= kMaxDevices) {
    return Status::unsupported("device", "a device index below " + std::to_string(kMaxDevices));
  }
  SideStream& m = made[device];
  if (m.stream == nullptr) {
    int least = 0, greatest = 0;
    if (Status s = cuda_status(cudaDeviceGetStreamPriorityRange(&least, &greatest), "reading stream priorities"); !s) {
      return s;
    }
    if (Status s = cuda_status(cudaStreamCreateWithPriority(&m.stream, cudaStreamNonBlocking, greatest),
                               "creating the side stream");
        !s) {
      return s;
    }
    if (Status s = cuda_status(cudaEventCreateWithFlags(&m.forked, cudaEventDisableTiming), "creating an event"); !s) {
      return s;
    }
    if (Status s = cuda_status(cudaEventCreateWithFlags(&m.joined, cudaEventDisableTiming), "creating an event"); !s) {
      return s;
    }
  }
  if (Status s = cuda_status(cudaEventRecord(m.forked, main), "forking the side stream"); !s) return s;
  if (Status s = cuda_status(cudaStreamWaitEvent(m.stream, m.forked, 0), "forking the side stream"); !s) return s;
  *side = m;
  return Status::success();
}

Status join_side_stream(cudaStream_t main, const SideStream& side) {
  if (Status s = cuda_status(cudaEventRecord(side.joined, side.stream), "joining the side stream"); !s) return s;
  return cuda_status(cudaStreamWaitEvent(main, side.joined, 0), "joining the side stream");
}

}  // namespace splitkv::detail
