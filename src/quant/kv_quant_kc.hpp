// Host definition of channel-quantized keys (the K side of the *_kc cache formats designed in
// docs/KV_FORMATS.md, "Keys quantized per channel"): INT8 or INT4 codes per token row as in the
// per-token formats, but each channel's (scale, min) is shared by a group of 64 consecutive
// positions of a sequence, and the newest incomplete group is kept in 16 bits in a per-sequence
// "tail" ring until it completes. Values are not touched here (they stay per token).
//
// This is the executable definition the GPU append and the kernels will be checked against, bit
// for bit, like kv_quant_host is for the per-token formats. Host-only C++17.
//
// Storage of one key cache (strides in elements, free unless stated):
//   codes        [blocks, slots, Hkv, D]    INT8 bytes or INT4 nibbles (element 2i low nibble), as
//                                           the per-token formats; a row is written when its group
//                                           completes, and read only then;
//   group_scales fp16 [blocks, Hkv, groups, 2 * D], groups = ceil(slots / 64), the last dim
//                contiguous: (scale[c], min[c]) of channel c over the group's 64 rows;
//   tail         fp16 or bf16 [tail_slots, Hkv, 128, D], D contiguous: a ring of two groups per
//                sequence; the row of position p is p % 128.
// blocks are pages of a paged cache (page_size a multiple of 64, so a group never spans pages)
// or sequences of a contiguous one (slots = capacity). Position p of a sequence lives in its block
// at slot p % slots, group (p % slots) / 64.
#pragma once

#include <cstdint>
#include <vector>

#include "common/formats.hpp"
#include "quant/kv_quant_host.hpp"
#include "splitkv/status.hpp"
#include "splitkv/types.hpp"

namespace splitkv::quant {

using detail::kKeyGroup;      // positions per channel (scale, min)
using detail::kKeyTailRows;   // the tail ring: the newest two groups

struct KcKeyCacheView {
  int bits = 8;       // 8 or 4
  int head_dim = 0;   // D; even for INT4
  int64_t slots = 0;  // positions per block (page_size or capacity)
  int64_t num_blocks = 0;
  int num_kv_heads = 0;
  uint8_t* codes = nullptr;
  int64_t code_stride_block = 0, code_stride_slot = 0, code_stride_head = 0;  // code elements
  uint16_t* group_scales = nullptr;
  int64_t scale_stride_block = 0, scale_stride_head = 0, scale_stride_group = 0;  // fp16 elements
  uint16_t* tail = nullptr;
  DType tail_dtype = DType::kBF16;  // kF16 or kBF16
  int64_t num_tail_slots = 0;
  int64_t tail_stride_slot = 0, tail_stride_head = 0, tail_stride_row = 0;  // 16-bit elements

  int64_t groups_per_block() const { return (slots + kKeyGroup - 1) / kKeyGroup; }
};

// Invalid argument naming the field: bits, head_dim, slots (a paged cache's page_size must be a
// multiple of 64: `paged`), counts, null pointers, odd INT4 strides, tail_dtype.
Status check_kc_view(const KcKeyCacheView& view, bool paged);

// Quantizes the 64 rows x[64][D] (fp32, already rounded to tail_dtype by the caller or not) of group
// `group` of `block`, KV head `head`: channel c becomes the column x[0..63][c] quantized by
// quantize_row_int's rule (fp16 min, smallest reaching fp16 scale, round half even, NaN/inf:
// (NaN, NaN) and codes 0), its codes written into the group's rows and (scale, min) into
// group_scales. Writes nothing else.
void write_key_group(const KcKeyCacheView& view, int64_t block, int64_t group, int64_t head, const float* x);

// Row `slot` of `block`, KV head `head`, dequantized from its codes and its group's scales
// (fma(scale[c], code, min[c]) in fp32).
void read_key_code_row(const KcKeyCacheView& view, int64_t block, int64_t slot, int64_t head, float* x);

// The tail row of position `position` (row position % 128) of tail slot `tail_slot`.
void read_key_tail_row(const KcKeyCacheView& view, int64_t tail_slot, int64_t head, int64_t position, float* x);

// Key `position` of a sequence of length `length` whose block for that position is `block` (the
// page that holds it, or the sequence's row of a contiguous cache) and whose tail slot is
// `tail_slot`: from the codes when its group is complete (position < 64 * floor(length / 64)),
// otherwise from the tail.
void read_key(const KcKeyCacheView& view, int64_t length, int64_t position, int64_t block,
              int64_t tail_slot, int64_t head, float* x);

// One token of an append call: where it goes (slot = block * slots + offset, the same slot ids
// as run_append_kv), its position in its sequence, its sequence's tail slot, and its key rows
// [Hkv][D] (values as they arrive; they are rounded to tail_dtype first).
struct KcAppendToken {
  int64_t slot = -1;
  int64_t position = -1;
  int64_t tail_slot = -1;
  const float* k = nullptr;  // [Hkv * D]
};

// Appends the keys of one call, in two phases:
//  1. every token whose position completes a group (position % 64 == 63) quantizes that group:
//     position q of the group is taken from the call's token i - (p - q) when that token exists
//     and has the same tail slot and position q (a sequence's tokens are contiguous in the call,
//     in position order), else from the tail ring (appended by an earlier call);
//  2. every token writes its rounded key rows to tail row position % 128, unless the call's token
//     i + 128 has the same tail slot and position + 128 (it would overwrite the row).
// A token whose slot, position or tail slot is out of range, or whose offset in its block is not
// position % slots (a page not aligned to its positions), is skipped. The ring keeps the newest two
// groups, so a sequence's length may move back by up to 64 positions (speculative decoding's
// rejected drafts) and the tail still holds its incomplete group.
void append_keys(const KcKeyCacheView& view, const std::vector<KcAppendToken>& tokens);

}  // namespace splitkv::quant
