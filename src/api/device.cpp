#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <string>

#include "api/device_arch.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv {

Status query_device(int device, DeviceInfo* info) {
  if (info == nullptr) return Status::invalid("info", "a non-null pointer", "nullptr");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device"/"no driver" error
    return Status(StatusCode::kNoDevice, "", "no CUDA device is available");
  }
  if (device < 0 || device >= count) {
    return Status::invalid("device", "an index in [0, " + std::to_string(count) + ")", std::to_string(device));
  }
  auto attribute = [&](cudaDeviceAttr attr) {
    int value = 0;
    cudaDeviceGetAttribute(&value, attr, device);
    return value;
  };
  info->sm_count = attribute(cudaDevAttrMultiProcessorCount);
  info->smem_per_sm_bytes = attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  info->smem_per_block_bytes = attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  info->l2_bytes = attribute(cudaDevAttrL2CacheSize);
  info->cc_major = attribute(cudaDevAttrComputeCapabilityMajor);
  info->cc_minor = attribute(cudaDevAttrComputeCapabilityMinor);
  return Status::success();
}

namespace detail {

bool current_device_supports_pdl() {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<int>, kMaxDevices> cached{};  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return false;
  int state = cached[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    state = major >= 9 ? 2 : 1;
    cached[device].store(state, std::memory_order_relaxed);
  }
  return state == 2;
}

}  // namespace detail
}  // namespace splitkv
