// Device memory with guard bytes of a known pattern before and after the part a test hands to the
// API: a write outside that part changes a guard byte (the promise that nothing is written out of
// bounds, checked without compute-sanitizer). Also the rebasing of a host tensor view onto its
// device copy, keeping any offset a hostile test gave the view's pointer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "splitkv/types.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::gpu_test {

class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 4096;
  static constexpr int kPattern = 0xa5;

  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), buffer_(bytes + 2 * kGuard) { buffer_.fill_bytes(kPattern); }
  // Holding a copy of `init`'s bytes.
  GuardedBuffer(const void* init, size_t bytes) : GuardedBuffer(bytes) { upload(init, bytes); }

  void* get() const { return static_cast<char*>(buffer_.get()) + kGuard; }
  void upload(const void* host, size_t bytes) {
    testing::check_cuda(cudaMemcpy(get(), host, bytes, cudaMemcpyHostToDevice), "upload");
  }
  void download(void* host, size_t bytes) const {
    testing::check_cuda(cudaMemcpy(host, get(), bytes, cudaMemcpyDeviceToHost), "download");
  }
  void download(void* host) const { download(host, bytes_); }
  bool guards_intact() const {
    std::vector<unsigned char> all(bytes_ + 2 * kGuard);
    buffer_.download(all.data(), all.size());
    for (size_t i = 0; i < kGuard; ++i) {
      if (all[i] != kPattern || all[kGuard + bytes_ + i] != kPattern) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  testing::DeviceBuffer buffer_;
};

// `view` (a tensor over host memory starting at host_base, its pointer possibly moved by a test)
// as the same view of the device copy at device_base.
inline TensorRef rebased(const TensorRef& view, const void* host_base, void* device_base) {
  TensorRef on_device = view;
  if (view.data != nullptr) {
    on_device.data = static_cast<char*>(device_base) +
                     (static_cast<const char*>(view.data) - static_cast<const char*>(host_base));
  }
  return on_device;
}

}  // namespace splitkv::gpu_test
