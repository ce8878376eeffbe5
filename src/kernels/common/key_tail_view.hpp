// The 16-bit tail ring of a *_kc cache's keys (docs/KV_FORMATS.md, "Keys quantized per channel"):
// key p of a sequence of length L at or past kKeyGroup floor(L / kKeyGroup) is row p % kKeyTailRows
// of the sequence's tail slot (common/formats.hpp). One plain view for every kernel that reads it
// (decode, chunked prefill's dequantization), filled once on the host from DecodeTensors::k_tail and
// tail_slots.
#pragma once

#include <cstdint>

#include "common/formats.hpp"
#include "common/host_device.hpp"

namespace splitkv::detail {

struct KeyTailView {
  const void* rows = nullptr;  // [tail slots, Hkv, kKeyTailRows, D] in the Q/O dtype; nullptr: no *_kc cache
  int64_t slot_stride = 0, head_stride = 0, row_stride = 0;  // elements
  int64_t num_slots = 0;
  const int32_t* seq_slots = nullptr;  // [batch]: sequence b's tail slot; nullptr: b
  int64_t seq_slots_stride = 0;
};

// Sequence b's tail slot, and whether it lies in the ring (else the sequence reads NaN).
SPLITKV_HD int64_t tail_slot_of(const KeyTailView& v, int b) {
  return v.seq_slots != nullptr ? v.seq_slots[b * v.seq_slots_stride] : b;
}
SPLITKV_HD bool tail_slot_in_ring(const KeyTailView& v, int64_t slot) { return slot >= 0 && slot < v.num_slots; }

}  // namespace splitkv::detail
