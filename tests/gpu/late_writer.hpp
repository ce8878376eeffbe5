// A kernel ahead of the one under test that writes its data late: it lets the next kernel in the
// stream launch at once (programmatic dependent launch, sm_90) and copies `count` int32 values
// from src to dst only after `delay_us` microseconds, so the next kernel's blocks run their
// before-the-wait code while dst still holds the old values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace splitkv::gpu_test {

cudaError_t write_int32_late(int32_t* dst, const int32_t* src, int count, unsigned delay_us, cudaStream_t stream);

}  // namespace splitkv::gpu_test
