// Owning device allocations and host<->device mirrors of test cases (CUDA runtime only).
#pragma once

#include <cstddef>
#include <vector>

#include "testing/chunk_case.hpp"
#include "testing/decode_case.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv::testing {

// Throws std::runtime_error on CUDA errors.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  void fill_bytes(int value);  // every byte (0xff: NaN in every fp32/fp16/bf16 element)

  template <class T>
  static DeviceBuffer from(const std::vector<T>& host) {
    DeviceBuffer b(host.size() * sizeof(T));
    b.upload(host.data(), host.size() * sizeof(T));
    return b;
  }
  static DeviceBuffer from(const ElementBuffer& host) {
    DeviceBuffer b(host.byte_size());
    b.upload(host.data(), host.byte_size());
    return b;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A DecodeCase copied to the device, with tensors pointing at the device copies.
struct DeviceDecodeCase {
  DeviceBuffer q, k, v, out, lse, seq_lens, block_table, k_scales, v_scales, k_tail, sinks, tree_mask;
  DecodeTensors tensors;

  explicit DeviceDecodeCase(DecodeCase& c);
  void upload_outputs(const DecodeCase& c);  // e.g. the NaN poison
  void download_outputs(DecodeCase& c) const;
  void upload_seq_lens(const std::vector<int32_t>& lens);
};

// A PrefillCase copied to the device.
struct DevicePrefillCase {
  DeviceBuffer q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks;
  PrefillTensors tensors;

  explicit DevicePrefillCase(PrefillCase& c);
  void upload_outputs(const PrefillCase& c);
  void download_outputs(PrefillCase& c) const;
};

// A ChunkCase copied to the device: the cache (through DeviceDecodeCase), the queries and outputs.
struct DeviceChunkCase {
  DeviceDecodeCase cache;
  DeviceBuffer q, out, lse, cu_q;
  PrefillTensors tensors;

  explicit DeviceChunkCase(ChunkCase& c);
  void upload_outputs(const ChunkCase& c);
  void download_outputs(ChunkCase& c) const;
};

bool gpu_available();
void check_cuda(int error, const char* what);  // cudaError_t as int, to keep CUDA headers out

}  // namespace splitkv::testing
