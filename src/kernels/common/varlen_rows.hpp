// Where sequence b's queries lie in a varlen tensor of total_q tokens: one rule for every kernel that
// reads cu_seqlens_q from device memory (the prefill kernels and the combine after them), so that a
// sequence whose offsets are invalid is reported in the same rows by all of them and nothing is
// read or written outside [0, total_q).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/host_device.hpp"

namespace splitkv::detail {

struct VarlenRows {
  int64_t begin = 0;  // first token, clamped to [0, total_q]
  int len = 0;        // tokens from begin, clamped to max_q_len and to the tensor's end
  bool bad = false;   // offsets out of order, past the tensor or longer than max_q_len
};

SPLITKV_HD VarlenRows varlen_rows(const int32_t* cu_seqlens_q, int b, int64_t total_q, int max_q_len) {
#if defined(__CUDA_ARCH__)
  using ::max;
  using ::min;
#else
  using std::max;
  using std::min;
#endif
  VarlenRows r;
  const int64_t q0 = cu_seqlens_q[b], q1 = cu_seqlens_q[b + 1];
  r.bad = q0 < 0 || q1 < q0 || q1 > total_q || q1 - q0 > max_q_len;
  r.begin = min(max(q0, int64_t(0)), total_q);
  r.len = int(min(max(q1 - r.begin, int64_t(0)), min(int64_t(max_q_len), total_q - r.begin)));
  return r;
}

}  // namespace splitkv::detail
