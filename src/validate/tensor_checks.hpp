// Checks of one tensor binding at the API boundary, shared by every entry point's validation:
// presence, dtype, rank, shape, strides, contiguity and alignment, each failure naming the argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/formats.hpp"
#include "splitkv/status.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

constexpr int64_t kAnySize = -1;  // shape wildcard: any size >= 1

std::string str(int64_t v);
bool known(DType dtype);
bool known(KvFormat format);
// The dtype's name, or "value N" for a value outside the enum.
std::string name_of(DType dtype);

// What a kernel reads from a tensor. shape: exact sizes, kAnySize (any >= 1), or values < -1 for
// "at least -value". vector_access: 16-byte loads along the last dim (16-byte aligned base and
// rows), else the element's own alignment.
struct Expect {
  DType dtype;
  std::vector<int64_t> shape;
  bool vector_access = true;
  bool contiguous_last = true;
};

Status check_tensor(const std::string& name, const TensorRef& t, const Expect& e);

// A tensor the call writes: no two indices may address the same element (a stride of 0 on a
// dimension longer than 1, or strides that make rows overlap, would make writes collide and leave a
// silently wrong result). Checked by sorting the dimensions longer than 1 by stride: each must step
// past the whole span of the ones before it.
Status check_no_aliasing(const std::string& name, const TensorRef& t);

// One scale tensor of a KV cache in a format whose scales are `kind` (docs/KV_FORMATS.md): none
// (must be empty), fp32 [Hkv] per head, or fp16 (scale, min) pairs [blocks, Hkv, slots, 2] with the
// blocks and slots of `cache`, each pair 4-byte aligned (read and written as one word).
Status check_kv_scale_tensor(const std::string& name, const TensorRef& s, KvScales kind, const char* format_name,
                             const TensorRef& cache, int64_t num_kv_heads);

}  // namespace splitkv::detail
