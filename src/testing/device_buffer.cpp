#include "testing/device_buffer.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "api/chunked_tensors.hpp"

namespace splitkv::testing {

void check_cuda(int error, const char* what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(error)));
  }
}

bool gpu_available() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  check_cuda(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  check_cuda(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

void DeviceBuffer::fill_bytes(int value) {
  if (bytes_ > 0) check_cuda(cudaMemset(ptr_, value, bytes_), "cudaMemset");
}

DeviceDecodeCase::DeviceDecodeCase(DecodeCase& c)
    : q(DeviceBuffer::from(c.q)),
      k(DeviceBuffer::from(c.k)),
      v(DeviceBuffer::from(c.v)),
      out(DeviceBuffer::from(c.out)),
      lse(DeviceBuffer::from(c.lse)),
      seq_lens(DeviceBuffer::from(c.seq_lens)),
      block_table(DeviceBuffer::from(c.block_table)),
      k_scales(DeviceBuffer::from(c.k_scales)),
      v_scales(DeviceBuffer::from(c.v_scales)),
      k_tail(DeviceBuffer::from(c.k_tail)),
      sinks(DeviceBuffer::from(c.sinks)),
      tree_mask(DeviceBuffer::from(c.tree_mask)) {
  tensors = c.host_tensors();  // shapes, strides and the host copies used for validation
  tensors.q.data = q.get();
  tensors.k.data = k.get();
  tensors.v.data = v.get();
  tensors.out.data = out.get();
  tensors.lse.data = lse.get();
  tensors.seq_lens.data = seq_lens.get();
  if (c.problem.page_size > 0) tensors.block_table.data = block_table.get();
  if (!tensors.k_scales.empty()) {
    tensors.k_scales.data = k_scales.get();
    tensors.v_scales.data = v_scales.get();
  }
  if (!tensors.k_tail.empty()) tensors.k_tail.data = k_tail.get();
  if (!tensors.sinks.empty()) tensors.sinks.data = sinks.get();
  if (!tensors.tree_mask.empty()) tensors.tree_mask.data = tree_mask.get();
}

namespace {

// A case's outputs (O in a 16-bit type, LSE in fp32) to the device and back; the way back waits
// for the kernels first.
void upload_case_outputs(const std::vector<uint16_t>& o, const std::vector<float>& l, DeviceBuffer& out,
                         DeviceBuffer& lse) {
  out.upload(o.data(), o.size() * sizeof(uint16_t));
  lse.upload(l.data(), l.size() * sizeof(float));
}
void download_case_outputs(const DeviceBuffer& out, const DeviceBuffer& lse, std::vector<uint16_t>& o,
                           std::vector<float>& l) {
  check_cuda(cudaDeviceSynchronize(), "kernel execution");
  out.download(o.data(), o.size() * sizeof(uint16_t));
  lse.download(l.data(), l.size() * sizeof(float));
}

}  // namespace

void DeviceDecodeCase::upload_outputs(const DecodeCase& c) { upload_case_outputs(c.out, c.lse, out, lse); }

void DeviceDecodeCase::download_outputs(DecodeCase& c) const { download_case_outputs(out, lse, c.out, c.lse); }

void DeviceDecodeCase::upload_seq_lens(const std::vector<int32_t>& lens) {
  seq_lens.upload(lens.data(), lens.size() * sizeof(int32_t));
}

DevicePrefillCase::DevicePrefillCase(PrefillCase& c)
    : q(DeviceBuffer::from(c.q)),
      k(DeviceBuffer::from(c.k)),
      v(DeviceBuffer::from(c.v)),
      out(DeviceBuffer::from(c.out)),
      lse(DeviceBuffer::from(c.lse)),
      cu_seqlens_q(DeviceBuffer::from(c.cu_seqlens_q)),
      cu_seqlens_k(DeviceBuffer::from(c.cu_seqlens_k)),
      sinks(DeviceBuffer::from(c.sinks)) {
  tensors = c.host_tensors();
  tensors.q.data = q.get();
  tensors.k.data = k.get();
  tensors.v.data = v.get();
  tensors.out.data = out.get();
  tensors.lse.data = lse.get();
  if (c.problem.varlen) {
    tensors.cu_seqlens_q.data = cu_seqlens_q.get();
    tensors.cu_seqlens_k.data = cu_seqlens_k.get();
  }
  if (!tensors.sinks.empty()) tensors.sinks.data = sinks.get();
}

void DevicePrefillCase::upload_outputs(const PrefillCase& c) { upload_case_outputs(c.out, c.lse, out, lse); }

void DevicePrefillCase::download_outputs(PrefillCase& c) const { download_case_outputs(out, lse, c.out, c.lse); }

DeviceChunkCase::DeviceChunkCase(ChunkCase& c)
    : cache(c.cache),
      q(DeviceBuffer::from(c.q)),
      out(DeviceBuffer::from(c.out)),
      lse(DeviceBuffer::from(c.lse)),
      cu_q(DeviceBuffer::from(c.cu_q)) {
  tensors = c.tensors;  // shapes, strides, host copies
  tensors.q.data = q.get();
  tensors.out.data = out.get();
  tensors.lse.data = lse.get();
  if (c.problem.varlen) tensors.cu_seqlens_q.data = cu_q.get();
  detail::bind_decode_cache(cache.tensors, &tensors);
}

void DeviceChunkCase::upload_outputs(const ChunkCase& c) { upload_case_outputs(c.out, c.lse, out, lse); }

void DeviceChunkCase::download_outputs(ChunkCase& c) const { download_case_outputs(out, lse, c.out, c.lse); }

}  // namespace splitkv::testing
