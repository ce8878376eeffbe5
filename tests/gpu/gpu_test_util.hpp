// Shared pieces of the GPU tests: skipping without a GPU or without an instantiation.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>

#include "splitkv/splitkv.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::gpu_test {

inline bool compiled(DType dtype, int head_dim) {
  const std::vector<int> dims = compiled_head_dims();
  return dtype_compiled(dtype) && std::find(dims.begin(), dims.end(), head_dim) != dims.end();
}

inline DeviceInfo device() {
  DeviceInfo info;
  EXPECT_TRUE(query_device(0, &info).ok());
  return info;
}

}  // namespace splitkv::gpu_test

// Skips the test when there is no GPU (CI) or the build lacks the instantiation.
#define SPLITKV_REQUIRE_GPU(dtype, head_dim)                                                    \
  do {                                                                                          \
    if (!::splitkv::testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
    if (!::splitkv::gpu_test::compiled(dtype, head_dim))                                        \
      GTEST_SKIP() << "not compiled into this build: " << ::splitkv::to_string(dtype) << " D=" << (head_dim); \
  } while (0)
