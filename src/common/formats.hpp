// The element-format traits table: storage bits and roles of every element type, and what each
// KV cache format stores. Host and device code read the same constexpr table; nothing outside
// the 16-bit kernels assumes 2-byte elements.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

struct ElementTraits {
  const char* name;
  int bits;          // storage bits per element (4 for kI4: two per byte)
  bool qo_type;      // may be the Q/O type of a problem
};

SPLITKV_HD constexpr ElementTraits element_traits(DType dtype) {
  switch (dtype) {
    case DType::kF16: return {"fp16", 16, true};
    case DType::kBF16: return {"bf16", 16, true};
    case DType::kF32: return {"fp32", 32, false};
    case DType::kI32: return {"int32", 32, false};
    case DType::kI8: return {"int8", 8, false};
    case DType::kI4: return {"int4", 4, false};
    case DType::kFP8E4M3: return {"fp8_e4m3", 8, false};
    case DType::kI64: return {"int64", 64, false};
  }
  return {"unknown", 0, false};
}

// Elements of `dtype` in 16 bytes (the vector width of every global load and store).
SPLITKV_HD constexpr int elements_per_16_bytes(DType dtype) { return 128 / element_traits(dtype).bits; }

// The keys of a *_kc format (docs/KV_FORMATS.md, "Keys quantized per channel"): one (scale[D],
// min[D]) per kKeyGroup positions of a KV head, and the keys of the incomplete groups kept in the
// Q/O dtype in a ring of kKeyTailRows rows per sequence (position p in row p % kKeyTailRows).
inline constexpr int kKeyGroup = 64;
inline constexpr int kKeyTailRows = 2 * kKeyGroup;

// How one side (K or V) of a KV cache stores a value: the codes of a quantized format, or 16-bit
// elements (the Q/O dtype). The decode kernels pick their operand path by it at compile time; the
// append and dequant kernels read it at run time (kernel parameters).
enum class CodeKind : int32_t { kFp8, kInt8, kInt4, kNative16 };

SPLITKV_HD constexpr CodeKind code_kind(DType element) {
  switch (element) {
    case DType::kFP8E4M3: return CodeKind::kFp8;
    case DType::kI8: return CodeKind::kInt8;
    case DType::kI4: return CodeKind::kInt4;
    default: return CodeKind::kNative16;
  }
}

// What the scale tensors of a KV format hold (docs/KV_FORMATS.md).
enum class KvScales {
  kNone,          // 16-bit values
  kPerHead,       // fp32 [Hkv], K and V each their own (fp8)
  kPerTokenPair,  // fp16 (scale, min) per token and KV head (int8, int4)
  kPerChannelGroup,  // fp16 (scale[D], min[D]) per kKeyGroup positions and KV head (the keys of *_kc)
};

struct KvFormatTraits {
  const char* name;
  DType k_element;   // element type of the K tensor (kNative: resolved first)
  DType v_element;   // element type of the V tensor
  bool quantized;    // codes plus scales
  bool implemented;  // the API takes it
  KvScales scales;   // of V, and of K unless channel_keys
  bool channel_keys = false;  // *_kc: keys per channel over groups (KvScales::kPerChannelGroup) plus a tail
  // The planner serves its decode problems by the decode kernels on its own; if not (the *_kc
  // formats, whose decode kernel is opt-in until measured), by chunked prefill over the dequantized
  // copy, unless options.family names a decode family that reads it.
  bool decode_kernels_by_default = true;

  SPLITKV_HD constexpr KvScales k_scales() const { return channel_keys ? KvScales::kPerChannelGroup : scales; }
  SPLITKV_HD constexpr CodeKind k_codes() const { return code_kind(k_element); }
  SPLITKV_HD constexpr CodeKind v_codes() const { return code_kind(v_element); }
};

SPLITKV_HD constexpr KvFormatTraits kv_format_traits(KvFormat format) {
  switch (format) {
    case KvFormat::kNative: return {"native", DType::kBF16, DType::kBF16, false, true, KvScales::kNone};  // resolve first
    case KvFormat::kF16: return {"fp16", DType::kF16, DType::kF16, false, true, KvScales::kNone};
    case KvFormat::kBF16: return {"bf16", DType::kBF16, DType::kBF16, false, true, KvScales::kNone};
    case KvFormat::kFP8E4M3: return {"fp8", DType::kFP8E4M3, DType::kFP8E4M3, true, true, KvScales::kPerHead};
    case KvFormat::kInt8: return {"int8", DType::kI8, DType::kI8, true, true, KvScales::kPerTokenPair};
    case KvFormat::kInt4: return {"int4", DType::kI4, DType::kI4, true, true, KvScales::kPerTokenPair};
    case KvFormat::kK8V4: return {"k8v4", DType::kI8, DType::kI4, true, true, KvScales::kPerTokenPair};
    case KvFormat::kInt8Kc: return {"int8_kc", DType::kI8, DType::kI8, true, true, KvScales::kPerTokenPair, true, false};
    case KvFormat::kInt4Kc: return {"int4_kc", DType::kI4, DType::kI4, true, true, KvScales::kPerTokenPair, true, false};
    case KvFormat::kK8V4Kc: return {"k8v4_kc", DType::kI8, DType::kI4, true, true, KvScales::kPerTokenPair, true, false};
  }
  return {"unknown", DType::kBF16, DType::kBF16, false, false, KvScales::kNone};
}

// kNative means "the Q/O dtype, unquantized": the explicit 16-bit format.
SPLITKV_HD constexpr KvFormat resolve_kv_format(KvFormat format, DType dtype) {
  if (format != KvFormat::kNative) return format;
  return dtype == DType::kF16 ? KvFormat::kF16 : KvFormat::kBF16;
}

// The per-token format whose codes (and values) a *_kc format shares; other formats themselves.
SPLITKV_HD constexpr KvFormat base_kv_format(KvFormat format) {
  switch (format) {
    case KvFormat::kInt8Kc: return KvFormat::kInt8;
    case KvFormat::kInt4Kc: return KvFormat::kInt4;
    case KvFormat::kK8V4Kc: return KvFormat::kK8V4;
    default: return format;
  }
}

// How the registry keys a KV format: 16-bit caches in the Q/O dtype are every family's "native"
// format; a quantized format (a *_kc one too) is its own key.
SPLITKV_HD constexpr KvFormat registry_kv_format(KvFormat format, DType dtype) {
  const KvFormat resolved = resolve_kv_format(format, dtype);
  return kv_format_traits(resolved).quantized ? resolved : KvFormat::kNative;
}

}  // namespace splitkv::detail
