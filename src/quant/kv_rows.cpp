#include "quant/kv_rows.hpp"

#include "common/formats.hpp"
#include "common/host_tensor.hpp"

namespace splitkv::quant {

IntCacheView int_cache_view(const TensorRef& codes, const TensorRef& scales) {
  IntCacheView view;
  view.bits = detail::element_traits(codes.dtype).bits;
  view.head_dim = static_cast<int>(codes.shape[3]);
  view.codes = static_cast<uint8_t*>(codes.data);
  view.code_stride_block = codes.stride[0];
  view.code_stride_slot = codes.stride[1];
  view.code_stride_head = codes.stride[2];
  view.scales = static_cast<uint16_t*>(scales.data);
  view.scale_stride_block = scales.stride[0];
  view.scale_stride_head = scales.stride[1];
  view.scale_stride_slot = scales.stride[2];
  return view;
}

KvRowReader::KvRowReader(KvFormat format, bool v_side, const TensorRef& cache, const TensorRef& scales, int head_dim)
    : cache_(cache), scales_(scales), head_dim_(head_dim) {
  const detail::KvFormatTraits traits = detail::kv_format_traits(format);
  element_ = v_side ? traits.v_element : traits.k_element;
  if (element_ == DType::kI8 || element_ == DType::kI4) int_view_ = int_cache_view(cache, scales);
}

void KvRowReader::read(int64_t block, int64_t slot, int64_t head, float* out) const {
  const int64_t row = detail::element_offset(cache_, block, slot, head);
  switch (element_) {
    case DType::kFP8E4M3: {
      const float scale = static_cast<const float*>(scales_.data)[head * scales_.stride[0]];
      return dequantize_row_fp8(static_cast<const uint8_t*>(cache_.data) + row, head_dim_, scale, out);
    }
    case DType::kI8:
    case DType::kI4:
      return read_cache_row(int_view_, block, slot, head, out);
    default:
      for (int j = 0; j < head_dim_; ++j) out[j] = detail::load_float(cache_, row + j * cache_.stride[3]);
  }
}

}  // namespace splitkv::quant
