#include <algorithm>

#include "common/formats.hpp"
#include "splitkv/types.hpp"

namespace splitkv {

const char* to_string(DType dtype) { return detail::element_traits(dtype).name; }

int bit_width(DType dtype) { return detail::element_traits(dtype).bits; }

const char* to_string(KvFormat format) { return detail::kv_format_traits(format).name; }

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
  // A stride list of another length leaves rank -1: validation reports it.
  if (stride.size() != shape.size()) {
    t.rank = -1;
    return t;
  }
  std::copy_n(stride.begin(), t.rank, t.stride.begin());
  return t;
}

}  // namespace splitkv
