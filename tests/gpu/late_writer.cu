#include "late_writer.hpp"

#include "kernels/common/pdl.cuh"

namespace splitkv::gpu_test {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void write_int32_late_kernel(int32_t* dst, const int32_t* src, int count, unsigned long long delay_ns) {
  detail::allow_dependent_launch();
  const unsigned long long start = global_ns();
  while (global_ns() - start < delay_ns) __nanosleep(1000);
  for (int i = threadIdx.x; i < count; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

cudaError_t write_int32_late(int32_t* dst, const int32_t* src, int count, unsigned delay_us, cudaStream_t stream) {
  write_int32_late_kernel<<<1, 32, 0, stream>>>(dst, src, count, 1000ull * delay_us);
  return cudaGetLastError();
}

}  // namespace splitkv::gpu_test
