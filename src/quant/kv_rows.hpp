// Reading one (token, KV head) row of a K or V cache as floats, whatever the cache's format:
// 16-bit values, FP8 codes times the per-head scale, or INT8/INT4 codes with their per-token
// (scale, min) (docs/KV_FORMATS.md). The fp64 reference and the CPU backend read decode caches
// through it, so both attend over exactly the values a quantized cache stands for.
#pragma once

#include <cstdint>

#include "quant/kv_quant_host.hpp"
#include "quant/kv_quant_kc.hpp"
#include "splitkv/types.hpp"

namespace splitkv::quant {

// The IntCacheView of an INT8/INT4 code tensor [blocks, slots, Hkv, D] (strides in elements:
// bytes or nibbles) and its fp16 (scale, min) tensor [blocks, Hkv, slots, 2].
IntCacheView int_cache_view(const TensorRef& codes, const TensorRef& scales);

// The KcKeyCacheView of a *_kc key cache: codes [blocks, slots, Hkv, D], group scales [blocks, Hkv,
// groups, 2 * D] and the tail [tail slots, Hkv, 128, D] (16-bit, the tail's dtype).
KcKeyCacheView kc_key_view(const TensorRef& codes, const TensorRef& group_scales, const TensorRef& tail);

class KvRowReader {
 public:
  // `cache` is the K (v_side false) or V tensor of a decode cache in `format` (resolved, never
  // kNative), `scales` its scale tensor (empty for 16-bit formats), `tail` a *_kc cache's k_tail
  // (K side only); all in host memory.
  KvRowReader(KvFormat format, bool v_side, const TensorRef& cache, const TensorRef& scales, int head_dim,
              const TensorRef& tail = TensorRef{});

  // Row of token `slot` of KV head `head` in `block` (a page, or a sequence of a contiguous cache),
  // stored per token (every format but the keys of *_kc).
  void read(int64_t block, int64_t slot, int64_t head, float* out) const;
  // Key or value `position` of a sequence of `length` keys whose tail is row `tail_slot` of k_tail,
  // stored at (block, slot): *_kc keys from their group's codes or the tail, others as read().
  void read(int64_t block, int64_t slot, int64_t head, int64_t position, int64_t length, int64_t tail_slot,
            float* out) const;
  // Tail slots this reader can read (*_kc keys; 0 otherwise).
  int64_t tail_slots() const { return channel_keys_ ? kc_view_.num_tail_slots : 0; }
  bool channel_keys() const { return channel_keys_; }

 private:
  DType element_;
  TensorRef cache_, scales_;
  int head_dim_;
  IntCacheView int_view_;  // INT8/INT4 caches
  bool channel_keys_ = false;
  KcKeyCacheView kc_view_;  // *_kc keys
};

}  // namespace splitkv::quant
