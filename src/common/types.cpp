#include <algorithm>
#include <vector>

#include "splitkv/splitkv.hpp"
#include "splitkv_build_config.hpp"

namespace splitkv {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "fp32";
    case DType::kI32: return "int32";
    case DType::kI8: return "int8";
    case DType::kI4: return "int4";
    case DType::kFP8E4M3: return "fp8_e4m3";
  }
  return "unknown";
}

int bit_width(DType dtype) {
  switch (dtype) {
    case DType::kF16:
    case DType::kBF16: return 16;
    case DType::kF32:
    case DType::kI32: return 32;
    case DType::kI8:
    case DType::kFP8E4M3: return 8;
    case DType::kI4: return 4;
  }
  return 0;
}

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

TensorRef TensorRef::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int>(std::min<size_t>(shape.size(), kMaxRank));
  std::copy_n(shape.begin(), t.rank, t.shape.begin());
  int64_t s = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    t.stride[i] = s;
    s *= t.shape[i];
  }
  return t;
}

TensorRef TensorRef::strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                             std::initializer_list<int64_t> stride) {
  TensorRef t = contiguous(data, dtype, shape);
  // A stride list of another length leaves rank 0's sentinel: validation reports it.
  if (stride.size() != shape.size()) {
    t.rank = -1;
    return t;
  }
  std::copy_n(stride.begin(), t.rank, t.stride.begin());
  return t;
}

std::vector<int> compiled_head_dims() {
  std::vector<int> dims;
  if (SPLITKV_HAS_HD64) dims.push_back(64);
  if (SPLITKV_HAS_HD128) dims.push_back(128);
  if (SPLITKV_HAS_HD256) dims.push_back(256);
  return dims;
}

bool dtype_compiled(DType dtype) {
  return (dtype == DType::kF16 && SPLITKV_HAS_FP16) || (dtype == DType::kBF16 && SPLITKV_HAS_BF16);
}

}  // namespace splitkv
