#include "quant/kv_quant_kc.hpp"

#include <cmath>
#include <string>

#include "common/half_convert.hpp"

namespace splitkv::quant {

namespace {

uint8_t* code_row(const KcKeyCacheView& v, int64_t block, int64_t slot, int64_t head) {
  const int64_t element = block * v.code_stride_block + slot * v.code_stride_slot + head * v.code_stride_head;
  return v.codes + element * v.bits / 8;  // INT4: element is even
}

uint16_t* group_pairs(const KcKeyCacheView& v, int64_t block, int64_t group, int64_t head) {
  return v.group_scales + block * v.scale_stride_block + head * v.scale_stride_head + group * v.scale_stride_group;
}

uint16_t* tail_row(const KcKeyCacheView& v, int64_t tail_slot, int64_t head, int64_t position) {
  return v.tail + tail_slot * v.tail_stride_slot + head * v.tail_stride_head + (position % kKeyTailRows) * v.tail_stride_row;
}

void set_code(uint8_t* row, int c, int bits, int q) {
  if (bits == 8) {
    row[c] = static_cast<uint8_t>(q);
    return;
  }
  uint8_t& byte = row[c >> 1];
  const int shift = (c & 1) * 4;
  byte = static_cast<uint8_t>((byte & ~(0x0f << shift)) | (q << shift));
}

float round_to_tail(const KcKeyCacheView& v, float x) { return detail::round_to(x, v.tail_dtype); }

}  // namespace

Status check_kc_view(const KcKeyCacheView& v, bool paged) {
  if (Status s = check_int_row(v.head_dim, v.bits); !s.ok()) return s;
  if (v.slots < 1) return Status::invalid("slots", ">= 1", std::to_string(v.slots));
  if (paged && v.slots % kKeyGroup != 0) {
    return Status::invalid("page_size", "a multiple of 64 (a key group never spans pages)", std::to_string(v.slots));
  }
  if (v.num_blocks < 0) return Status::invalid("num_blocks", ">= 0", std::to_string(v.num_blocks));
  if (v.num_kv_heads < 1) return Status::invalid("num_kv_heads", ">= 1", std::to_string(v.num_kv_heads));
  if (v.num_tail_slots < 0) return Status::invalid("num_tail_slots", ">= 0", std::to_string(v.num_tail_slots));
  if (v.codes == nullptr) return Status::invalid("codes", "a pointer", "null");
  if (v.group_scales == nullptr) return Status::invalid("group_scales", "a pointer", "null");
  if (v.tail == nullptr) return Status::invalid("tail", "a pointer", "null");
  if (v.tail_dtype != DType::kF16 && v.tail_dtype != DType::kBF16) {
    return Status::invalid("tail_dtype", "fp16 or bf16", to_string(v.tail_dtype));
  }
  return check_code_strides(v.bits, v.code_stride_block, v.code_stride_slot, v.code_stride_head);
}

void write_key_group(const KcKeyCacheView& v, int64_t block, int64_t group, int64_t head, const float* x) {
  const int d = v.head_dim;
  float column[kKeyGroup];
  uint8_t packed[kKeyGroup];  // the column's codes (INT4: two a byte), unpacked below
  uint16_t* pairs = group_pairs(v, block, group, head);
  for (int c = 0; c < d; ++c) {
    for (int i = 0; i < kKeyGroup; ++i) column[i] = x[size_t(i) * d + c];
    const RowScale s = quantize_row_int(column, kKeyGroup, v.bits, packed);
    pairs[c] = s.scale_fp16;
    pairs[d + c] = s.min_fp16;
    for (int i = 0; i < kKeyGroup; ++i) {
      const int64_t slot = group * kKeyGroup + i;
      if (slot >= v.slots) break;  // a contiguous cache's last group past its capacity: never completes
      set_code(code_row(v, block, slot, head), c, v.bits, unpack_code(packed, i, v.bits));
    }
  }
}

void read_key_code_row(const KcKeyCacheView& v, int64_t block, int64_t slot, int64_t head, float* x) {
  const uint8_t* row = code_row(v, block, slot, head);
  const uint16_t* pairs = group_pairs(v, block, slot / kKeyGroup, head);
  for (int c = 0; c < v.head_dim; ++c) {
    const float scale = detail::fp16_to_float(pairs[c]);
    const float min = detail::fp16_to_float(pairs[v.head_dim + c]);
    x[c] = std::fma(scale, static_cast<float>(unpack_code(row, c, v.bits)), min);
  }
}

void read_key_tail_row(const KcKeyCacheView& v, int64_t tail_slot, int64_t head, int64_t position, float* x) {
  const uint16_t* row = tail_row(v, tail_slot, head, position);
  for (int c = 0; c < v.head_dim; ++c) {
    x[c] = v.tail_dtype == DType::kF16 ? detail::fp16_to_float(row[c]) : detail::bf16_to_float(row[c]);
  }
}

void read_key(const KcKeyCacheView& v, int64_t length, int64_t position, int64_t block, int64_t tail_slot,
              int64_t head, float* x) {
  const int64_t complete = length / kKeyGroup * kKeyGroup;
  if (position < complete) return read_key_code_row(v, block, position % v.slots, head, x);
  read_key_tail_row(v, tail_slot, head, position, x);
}

void append_keys(const KcKeyCacheView& v, const std::vector<KcAppendToken>& tokens) {
  const int d = v.head_dim, hkv = v.num_kv_heads;
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto valid = [&](const KcAppendToken& t) {
    return t.k != nullptr && t.slot >= 0 && t.slot < v.num_blocks * v.slots && t.position >= 0 &&
           t.tail_slot >= 0 && t.tail_slot < v.num_tail_slots && t.slot % v.slots == t.position % v.slots;
  };
  // Token j of the call holds `position` of the same sequence as token i.
  auto holds = [&](int64_t j, const KcAppendToken& ti, int64_t position) {
    if (j < 0 || j >= n) return false;
    const KcAppendToken& tj = tokens[size_t(j)];
    return valid(tj) && tj.tail_slot == ti.tail_slot && tj.position == position;
  };

  // Phase 1: complete groups, from this call's rows and the ring.
  std::vector<float> group(size_t(kKeyGroup) * d);
  for (int64_t i = 0; i < n; ++i) {
    const KcAppendToken& t = tokens[size_t(i)];
    if (!valid(t) || t.position % kKeyGroup != kKeyGroup - 1) continue;
    const int64_t block = t.slot / v.slots, offset = t.slot % v.slots;
    const int64_t first = t.position - (kKeyGroup - 1);
    for (int h = 0; h < hkv; ++h) {
      for (int q = 0; q < kKeyGroup; ++q) {
        float* row = &group[size_t(q) * d];
        const int64_t j = i - (kKeyGroup - 1 - q);
        if (holds(j, t, first + q)) {
          const float* k = tokens[size_t(j)].k + size_t(h) * d;
          for (int c = 0; c < d; ++c) row[c] = round_to_tail(v, k[c]);
        } else {
          read_key_tail_row(v, t.tail_slot, h, first + q, row);
        }
      }
      write_key_group(v, block, offset / kKeyGroup, h, group.data());
    }
  }

  // Phase 2: the ring, unless a later token of the call takes the same row.
  for (int64_t i = 0; i < n; ++i) {
    const KcAppendToken& t = tokens[size_t(i)];
    if (!valid(t) || holds(i + kKeyTailRows, t, t.position + kKeyTailRows)) continue;
    for (int h = 0; h < hkv; ++h) {
      uint16_t* row = tail_row(v, t.tail_slot, h, t.position);
      const float* k = t.k + size_t(h) * d;
      for (int c = 0; c < d; ++c) {
        row[c] = v.tail_dtype == DType::kF16 ? detail::float_to_fp16(k[c]) : detail::float_to_bf16(k[c]);
      }
    }
  }
}

}  // namespace splitkv::quant
