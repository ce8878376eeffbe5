#include "kernels/launch/kernel_attributes.hpp"

#include <map>
#include <mutex>
#include <utility>

namespace splitkv::detail {
namespace {

struct KernelState {
  int smem_limit = 48 * 1024;  // what every kernel accepts without opting in
  bool non_portable_clusters = false;
};

std::mutex& attributes_mutex() {
  static std::mutex m;
  return m;
}

// Keyed by (kernel, device): attributes are per device.
std::map<std::pair<const void*, int>, KernelState>& attribute_table() {
  static std::map<std::pair<const void*, int>, KernelState> table;
  return table;
}

}  // namespace

cudaError_t ensure_dynamic_smem(const void* kernel, int smem_bytes) {
  if (smem_bytes <= 48 * 1024) return cudaSuccess;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(attributes_mutex());
  KernelState& state = attribute_table()[{kernel, device}];
  if (smem_bytes <= state.smem_limit) return cudaSuccess;
  // Not a stream operation: legal during graph capture.
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
      e != cudaSuccess) {
    return e;
  }
  state.smem_limit = smem_bytes;
  return cudaSuccess;
}

cudaError_t ensure_non_portable_clusters(const void* kernel) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(attributes_mutex());
  KernelState& state = attribute_table()[{kernel, device}];
  if (state.non_portable_clusters) return cudaSuccess;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      e != cudaSuccess) {
    return e;
  }
  state.non_portable_clusters = true;
  return cudaSuccess;
}

}  // namespace splitkv::detail
