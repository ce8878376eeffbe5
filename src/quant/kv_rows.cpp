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

KcKeyCacheView kc_key_view(const TensorRef& codes, const TensorRef& group_scales, const TensorRef& tail) {
  KcKeyCacheView v;
  v.bits = detail::element_traits(codes.dtype).bits;
  v.head_dim = static_cast<int>(codes.shape[3]);
  v.slots = codes.shape[1];
  v.num_blocks = codes.shape[0];
  v.num_kv_heads = static_cast<int>(codes.shape[2]);
  v.codes = static_cast<uint8_t*>(codes.data);
  v.code_stride_block = codes.stride[0];
  v.code_stride_slot = codes.stride[1];
  v.code_stride_head = codes.stride[2];
  v.group_scales = static_cast<uint16_t*>(group_scales.data);
  v.scale_stride_block = group_scales.stride[0];
  v.scale_stride_head = group_scales.stride[1];
  v.scale_stride_group = group_scales.stride[2];
  v.tail = static_cast<uint16_t*>(tail.data);
  v.tail_dtype = tail.dtype;
  v.num_tail_slots = tail.shape[0];
  v.tail_stride_slot = tail.stride[0];
  v.tail_stride_head = tail.stride[1];
  v.tail_stride_row = tail.stride[2];
  return v;
}

KvRowReader::KvRowReader(KvFormat format, bool v_side, const TensorRef& cache, const TensorRef& scales, int head_dim,
                         const TensorRef& tail)
    : cache_(cache), scales_(scales), head_dim_(head_dim) {
  const detail::KvFormatTraits traits = detail::kv_format_traits(format);
  element_ = v_side ? traits.v_element : traits.k_element;
  channel_keys_ = traits.channel_keys && !v_side;
  if (channel_keys_) {
    kc_view_ = kc_key_view(cache, scales, tail);
  } else if (element_ == DType::kI8 || element_ == DType::kI4) {
    int_view_ = int_cache_view(cache, scales);
  }
}

void KvRowReader::read(int64_t block, int64_t slot, int64_t head, int64_t position, int64_t length,
                       int64_t tail_slot, float* out) const {
  if (!channel_keys_) return read(block, slot, head, out);
  read_key(kc_view_, length, position, block, tail_slot, head, out);
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
