// One view of the keys and values a kernel reads: a decode cache (contiguous or paged, 16-bit or
// quantized, with its scales and a *_kc cache's tail) or, for prefill, K/V token tensors. The
// decode and prefill kernels take it as DecodeParams::kv / PrefillParams::kv, filled on the host by
// one function (api/kv_view.hpp), so the layout of a cache is spelled once.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "kernels/common/fast_divmod.hpp"
#include "kernels/common/key_tail_view.hpp"

namespace splitkv::detail {

// One side (K or V). Token t of sequence b, KV head h lives at
//   contiguous: data + b * block_stride + t * token_stride + h * head_stride
//   paged:      data + block_table[b][t / page_size] * block_stride
//                    + (t % page_size) * token_stride + h * head_stride
//   varlen token tensors (prefill): data + (cu_seqlens_k[b] + t) * token_stride + h * head_stride
//                    (block_stride 0)
// Strides count elements of a 16-bit cache and bytes of a quantized one (codes: one byte each, or
// two per byte for INT4).
struct KvSide {
  const void* data = nullptr;
  int64_t block_stride = 0, token_stride = 0, head_stride = 0;
};

// Scales of a quantized side (docs/KV_FORMATS.md). FP8: fp32 per KV head, head h's at data + h *
// head_stride (fp32 elements; 0 broadcasts one scale). INT8/INT4: fp16 (scale, min) pairs of key t
// of KV head h at data + block * block_stride + h * head_stride + slot * token_stride (fp16
// elements; block and slot as for the codes). *_kc keys: token_stride steps one key group.
struct KvScaleView {
  const void* data = nullptr;
  int64_t block_stride = 0, head_stride = 0, token_stride = 0;
};

struct KvCacheView {
  KvSide k, v;
  KvScaleView k_scales, v_scales;
  const int32_t* block_table = nullptr;  // [batch, max pages] page ids; nullptr: contiguous
  int64_t block_table_stride = 0;
  FastDivmod page_size;  // tokens per page (paged)
  // Pages in the pool: a page id outside [0, num_pages) is invalid device data (NaN in its
  // sequence). Page ids are int32, so the host caps it at INT32_MAX.
  int num_pages = 0;
  const int32_t* seq_lens = nullptr;  // [batch] keys per sequence (a cache); nullptr: token tensors
  KeyTailView k_tail;                  // a *_kc cache's 16-bit tail ring (rows nullptr: none)
};

}  // namespace splitkv::detail
