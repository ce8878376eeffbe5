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

// Whether this build holds the instance a plan runs (its family at the problem's dtype, head dim
// and KV format: a 16-bit family's instances are keyed kNative, a quantized family's by format).
inline bool plan_compiled(const Plan& plan) {
  const bool decode = plan.kind() == Plan::Kind::kDecode;
  const DType dtype = decode ? plan.decode().dtype : plan.prefill().dtype;
  const int head_dim = decode ? plan.decode().head_dim : plan.prefill().head_dim;
  const KvFormat kv_format = decode ? plan.decode().kv_format : plan.prefill().kv_format;
  for (const KernelFamilyInfo& f : kernel_families()) {
    if (f.name != plan.family()) continue;
    for (const KernelFamilyInfo::Compiled& c : f.compiled) {
      if (c.dtype == dtype && c.head_dim == head_dim && (c.kv_format == KvFormat::kNative || c.kv_format == kv_format)) {
        return true;
      }
    }
  }
  return false;
}

inline DeviceInfo device() {
  DeviceInfo info;
  EXPECT_TRUE(query_device(0, &info).ok());
  return info;
}

// A workspace of `bytes` filled with NaN (all bits set): a partial nothing wrote fails the test.
inline testing::DeviceBuffer poisoned_workspace(size_t bytes) {
  testing::DeviceBuffer b(bytes);
  b.fill_bytes(0xff);
  return b;
}

}  // namespace splitkv::gpu_test

// Skips the test when there is no GPU (CI) or the build lacks the instantiation.
#define SPLITKV_REQUIRE_PLAN_COMPILED(plan)                                                         \
  do {                                                                                              \
    if (!::splitkv::gpu_test::plan_compiled(plan))                                                  \
      GTEST_SKIP() << "not compiled into this build: family " << (plan).family();                     \
  } while (0)

#define SPLITKV_REQUIRE_GPU(dtype, head_dim)                                                    \
  do {                                                                                          \
    if (!::splitkv::testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
    if (!::splitkv::gpu_test::compiled(dtype, head_dim))                                        \
      GTEST_SKIP() << "not compiled into this build: " << ::splitkv::to_string(dtype) << " D=" << (head_dim); \
  } while (0)
