// Reading one (token, KV head) row of a K or V cache as floats, whatever the cache's format:
// 16-bit values, FP8 codes times the per-head scale, or INT8/INT4 codes with their per-token
// (scale, min) (docs/KV_FORMATS.md). The fp64 reference and the CPU backend read decode caches
// through it, so both attend over exactly the values a quantized cache stands for.
#pragma once

#include <cstdint>

#include "quant/kv_quant_host.hpp"
#include "splitkv/types.hpp"

namespace splitkv::quant {

// The IntCacheView of an INT8/INT4 code tensor [blocks, slots, Hkv, D] (strides in elements:
// bytes or nibbles) and its fp16 (scale, min) tensor [blocks, Hkv, slots, 2].
IntCacheView int_cache_view(const TensorRef& codes, const TensorRef& scales);

class KvRowReader {
 public:
  // `cache` is the K (v_side false) or V tensor of a decode cache in `format` (resolved, never
  // kNative), `scales` its scale tensor (empty for 16-bit formats); both in host memory.
  KvRowReader(KvFormat format, bool v_side, const TensorRef& cache, const TensorRef& scales, int head_dim);

  // Row of token `slot` of KV head `head` in `block` (a page, or a sequence of a contiguous cache).
  void read(int64_t block, int64_t slot, int64_t head, float* out) const;

 private:
  DType element_;
  TensorRef cache_, scales_;
  int head_dim_;
  IntCacheView int_view_;  // INT8/INT4 caches
};

}  // namespace splitkv::quant
