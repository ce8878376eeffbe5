// Where one appended token of a *_kc cache belongs, read from the call's device arrays, and the
// two-phase rule's tests (src/quant/kv_quant_kc.hpp, append_keys, is the definition):
//  - a token is valid when its slot, position and tail slot are in range and the slot's offset in
//    its block is position % slots (a page aligned to its positions); an invalid token writes
//    nothing, K or V;
//  - token j holds position `position` of token i's sequence when it is valid, has i's tail slot
//    and that position (a sequence's tokens are contiguous in the call, in position order).
#pragma once

#include <cstdint>

#include "kernels/quant/append_kv_params.hpp"

namespace splitkv::detail {

struct KcToken {
  bool valid = false;
  int64_t slot = -1, position = -1, tail_slot = -1;
};

__device__ __forceinline__ int64_t append_slot_of(const AppendKvParams& p, int64_t token) {
  return p.slots_64 ? static_cast<const int64_t*>(p.slots)[token * p.slots_stride]
                    : static_cast<const int32_t*>(p.slots)[token * p.slots_stride];
}

__device__ __forceinline__ KcToken kc_token(const AppendKvParams& p, int64_t token) {
  const AppendKcParams& kc = p.kc;
  KcToken t;
  t.slot = append_slot_of(p, token);
  t.position = kc.positions_64 ? static_cast<const int64_t*>(kc.positions)[token * kc.positions_stride]
                               : static_cast<const int32_t*>(kc.positions)[token * kc.positions_stride];
  t.tail_slot = kc.tail_slots[token * kc.tail_slots_stride];
  t.valid = t.slot >= 0 && t.slot < p.num_slots && t.position >= 0 && t.tail_slot >= 0 &&
            t.tail_slot < kc.num_tail_slots && t.slot % p.slots_per_block == t.position % p.slots_per_block;
  return t;
}

// Token j (any index) holds `position` of token i's sequence (tail slot `tail_slot`).
__device__ __forceinline__ bool kc_token_holds(const AppendKvParams& p, int64_t j, int64_t tail_slot,
                                               int64_t position) {
  if (j < 0 || j >= p.num_tokens) return false;
  const KcToken t = kc_token(p, j);
  return t.valid && t.tail_slot == tail_slot && t.position == position;
}

}  // namespace splitkv::detail
