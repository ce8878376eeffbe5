// Host quantizer and dequantizer of the quantized KV cache formats (FP8 e4m3, INT8, INT4, K8V4):
// the definition every later piece (the GPU append kernel, the reference, the tests) is checked
// against, bit for bit. Host-only C++17, no CUDA headers. docs/KV_FORMATS.md states each format
// as stored; the comments here only name the contracts.
//
// Argument contract: a shape the format cannot hold (head dim <= 0, an odd head dim in INT4, bits
// other than 4 or 8, an FP8 scale that is not positive and finite, a misaligned cache view) is
// reported by the check_* functions as an invalid-argument Status naming the argument; the
// functions that write throw splitkv::Error with that Status before writing anything.
#pragma once

#include <cstdint>

#include "splitkv/status.hpp"
#include "splitkv/types.hpp"

namespace splitkv::quant {

// ---- FP8 e4m3 (OCP e4m3fn): 1 sign, 4 exponent (bias 7), 3 mantissa bits, no infinities ---------

inline constexpr float kE4M3Max = 448.f;    // S.1111.110
inline constexpr uint8_t kE4M3MaxCode = 0x7e;
inline constexpr uint8_t kE4M3NaN = 0x7f;   // S.1111.111 is NaN for either sign; encoders write 0x7f

// Round to nearest, ties to even, saturating: |f| beyond 448 (infinities included) gives +-448;
// NaN gives 0x7f. Signed zeros keep their sign (-0 -> 0x80, and so do negatives that round to 0).
uint8_t float_to_e4m3(float f);
// Exact: every code is a float. 0x7f and 0xff are NaN.
float e4m3_to_float(uint8_t code);

// Per-KV-head scale: a row of d values x is stored as codes[i] = float_to_e4m3(x[i] / scale)
// (the division in fp32, rounded to nearest), and read back as scale * e4m3_to_float(code) (one
// fp32 rounding). scale must be positive and finite.
Status check_fp8_row(int d, float scale);
void quantize_row_fp8(const float* x, int d, float scale, uint8_t* codes);
void dequantize_row_fp8(const uint8_t* codes, int d, float scale, float* x);

// ---- INT8 / INT4, asymmetric per (token, KV head) --------------------------------------------

// The fp16 bits of one row's (scale, min): x = scale * q + min for the unsigned code q.
struct RowScale {
  uint16_t scale_fp16 = 0;
  uint16_t min_fp16 = 0;
};

inline constexpr uint16_t kFp16NaN = 0x7e00;      // (scale, min) of a row that holds NaN or +-inf
inline constexpr uint16_t kFp16MaxFinite = 0x7bff;  // 65504

// Largest code: 2^bits - 1 (255 or 15).
constexpr int max_code(int bits) { return (1 << bits) - 1; }
// Bytes of one row's packed codes: d (INT8) or d / 2 (INT4, two codes a byte).
constexpr int packed_row_bytes(int d, int bits) { return d * bits / 8; }

// bits is 8 or 4; d >= 1, and even when bits is 4.
Status check_int_row(int d, int bits);

// Quantizes one row (docs/KV_FORMATS.md, "INT8 and INT4"):
//   min16   = fp16(min x), nearest even, saturated to +-65504, -0 stored as +0;
//   scale16 = the smallest fp16 s >= 0 with min16 + (2^bits - 1) * s >= max x in exact arithmetic
//             (so the largest code reaches the row's maximum), saturated to 65504;
//   q       = clamp(round_half_even((x - min16) / scale16), 0, 2^bits - 1), in fp32.
// A constant row (max == min), and a row whose maximum does not exceed min16, stores scale 0 and
// codes 0. A row holding NaN or +-inf stores (kFp16NaN, kFp16NaN) and codes 0: it reads back NaN.
// INT4 packs element 2i in the low nibble and 2i + 1 in the high nibble of byte i. Writes
// packed_row_bytes(d, bits) bytes, every bit of them.
RowScale quantize_row_int(const float* x, int d, int bits, uint8_t* codes_packed);
// x[i] = fma(scale16, q_i, min16) in fp32 (one rounding).
void dequantize_row_int(const uint8_t* codes_packed, int d, int bits, RowScale s, float* x);

// Code i of a packed row (bits 8 or 4).
inline int unpack_code(const uint8_t* codes_packed, int i, int bits) {
  if (bits == 8) return codes_packed[i];
  const uint8_t byte = codes_packed[i >> 1];
  return (i & 1) ? (byte >> 4) : (byte & 0x0f);
}

// ---- bytes per token and KV head ----------------------------------------------------------------

// What one token of one KV head occupies in a cache of `format` at head dim d: codes (or 16-bit
// values) and per-token scales for K and for V. FP8 has no per-token scales; its fp32 scale per KV
// head (4 B for K, 4 B for V) is in per_head_scale_bytes and does not grow with the tokens.
struct TokenHeadBytes {
  int64_t k_data = 0;
  int64_t k_scales = 0;
  int64_t v_data = 0;
  int64_t v_scales = 0;
  int64_t per_head_scale_bytes = 0;

  int64_t k() const { return k_data + k_scales; }
  int64_t v() const { return v_data + v_scales; }
  int64_t total() const { return k() + v(); }
};

// Invalid argument for d <= 0 and for an odd d in a format with an INT4 side (kInt4, kK8V4).
Status check_token_head_bytes(KvFormat format, int d);
// kNative counts 16-bit values (fp16 and bf16 take the same room). Throws Error when the check fails.
TokenHeadBytes token_head_bytes(KvFormat format, int d);

// ---- a strided cache of one INT row format (K or V) -------------------------------------------------

// One K or V cache in INT8 or INT4: codes [blocks, slots, Hkv, d] (blocks are pages of a paged
// cache, sequences of a contiguous one; slots are the page_size or capacity positions) with the
// d codes of a row contiguous and packed, and (scale, min) fp16 pairs [blocks, Hkv, slots, 2] with
// the pair contiguous. Strides are free, in elements: code elements (nibbles for INT4, so they
// must be even there) and fp16 elements.
struct IntCacheView {
  int bits = 8;
  int head_dim = 0;
  uint8_t* codes = nullptr;
  int64_t code_stride_block = 0, code_stride_slot = 0, code_stride_head = 0;
  uint16_t* scales = nullptr;
  int64_t scale_stride_block = 0, scale_stride_head = 0, scale_stride_slot = 0;
};

Status check_cache_view(const IntCacheView& view);
// INT4 codes' strides (block, slot, head; in nibbles) must be even: rows start on a byte. Other
// widths: any. Names the offending stride (code_stride_block, _slot, _head).
Status check_code_strides(int bits, int64_t stride_block, int64_t stride_slot, int64_t stride_head);
// Appends (quantizes) the row x of token `slot` of KV head `head` in `block`: writes its codes and
// its (scale, min) pair, nothing else. Returns the pair. Throws Error when the view is invalid.
RowScale write_cache_row(const IntCacheView& view, int64_t block, int64_t slot, int64_t head,
                         const float* x);
// Dequantizes that row into x[0, head_dim).
void read_cache_row(const IntCacheView& view, int64_t block, int64_t slot, int64_t head, float* x);

}  // namespace splitkv::quant
