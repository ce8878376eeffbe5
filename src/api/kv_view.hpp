// The KV-cache view the kernels read (kernels/common/kv_cache_view.hpp), filled from the API's
// tensors in one place: a decode cache (decode, chunked prefill) or prefill's K/V token tensors.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>

#include "common/formats.hpp"
#include "kernels/common/kv_cache_view.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

// The keys' tail ring of a *_kc cache (k_tail [slots, Hkv, kKeyTailRows, D], tail_slots [batch] or
// empty).
inline KeyTailView key_tail_view(const TensorRef& k_tail, const TensorRef& tail_slots) {
  KeyTailView v;
  v.rows = k_tail.data;
  v.slot_stride = k_tail.stride[0];
  v.head_stride = k_tail.stride[1];
  v.row_stride = k_tail.stride[2];
  v.num_slots = k_tail.shape[0];
  if (!tail_slots.empty()) {
    v.seq_slots = static_cast<const int32_t*>(tail_slots.data);
    v.seq_slots_stride = tail_slots.stride[0];
  }
  return v;
}

// A side [blocks, slots, Hkv, D]: element strides of a 16-bit tensor, byte strides of a quantized
// cache's codes (validation made INT4 strides, in nibbles, even).
inline KvSide cache_side(const TensorRef& x, bool bytes) {
  const int64_t bits = bytes ? element_traits(x.dtype).bits : 8;
  return KvSide{x.data, x.stride[0] * bits / 8, x.stride[1] * bits / 8, x.stride[2] * bits / 8};
}

// Prefill's K/V token tensors: padded [B, L, Hkv, D], or varlen [total, Hkv, D] (folded: the batch
// is in cu_seqlens_k, block stride 0). Element strides.
inline KvSide token_side(const TensorRef& x, bool folded) {
  if (folded) return KvSide{x.data, 0, x.stride[0], x.stride[1]};
  return KvSide{x.data, x.stride[0], x.stride[1], x.stride[2]};
}

// A decode cache as the kernels read it. Tensors: DecodeTensors or PrefillTensors (k, v, k_scales,
// v_scales, block_table, seq_lens, k_tail, tail_slots); format: the resolved KV format;
// page_size: the problem's (0: contiguous).
template <class Tensors>
KvCacheView cache_view(const Tensors& t, KvFormat format, int page_size) {
  const KvFormatTraits traits = kv_format_traits(format);
  KvCacheView kv;
  kv.k = cache_side(t.k, traits.quantized);
  kv.v = cache_side(t.v, traits.quantized);
  kv.k_scales.data = t.k_scales.data;
  kv.v_scales.data = t.v_scales.data;
  if (t.k_scales.rank == 1) {  // FP8: fp32 [Hkv], any stride (0: one scale broadcast to every head)
    kv.k_scales.head_stride = t.k_scales.stride[0];
    kv.v_scales.head_stride = t.v_scales.stride[0];
  }
  if (t.k_scales.rank == 4) {  // (scale, min) pairs [blocks, Hkv, slots, 2] (*_kc keys: [blocks, Hkv, groups, 2D])
    kv.k_scales = KvScaleView{t.k_scales.data, t.k_scales.stride[0], t.k_scales.stride[1], t.k_scales.stride[2]};
    kv.v_scales = KvScaleView{t.v_scales.data, t.v_scales.stride[0], t.v_scales.stride[1], t.v_scales.stride[2]};
  }
  if (page_size > 0) {
    kv.block_table = static_cast<const int32_t*>(t.block_table.data);
    kv.block_table_stride = t.block_table.stride[0];
    kv.page_size = FastDivmod::make(page_size);
    kv.num_pages = static_cast<int>(std::min<int64_t>(t.k.shape[0], INT32_MAX));  // page ids are int32
  }
  if (traits.channel_keys) kv.k_tail = key_tail_view(t.k_tail, t.tail_slots);
  kv.seq_lens = static_cast<const int32_t*>(t.seq_lens.data);
  return kv;
}

}  // namespace splitkv::detail
