#include "quant/kv_quant_host.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/formats.hpp"
#include "common/half_convert.hpp"

namespace splitkv::quant {

using detail::float_to_fp16;
using detail::fp16_to_float;

// ---- FP8 e4m3 ------------------------------------------------------------------------------------

uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return kE4M3NaN;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  // Values in (448, 464] round to 448 (464 is the tie with 480, whose mantissa 111 is odd and the
  // NaN pattern anyway); larger ones, infinities included, saturate to it.
  if (a >= kE4M3Max) return sign | kE4M3MaxCode;
  if (a < 0.015625f) {
    // Below the smallest normal 2^-6: subnormals M * 2^-9. a * 512 is exact; rounding gives 0..8,
    // and 8 is the code of 2^-6 (exponent field 1, mantissa 0), so the carry is the code itself.
    return static_cast<uint8_t>(sign | static_cast<int>(std::nearbyint(a * 512.f)));
  }
  int e = 0;
  const float fr = std::frexp(a, &e);                    // a = fr * 2^e, fr in [0.5, 1)
  const float mantissa = (std::ldexp(fr, 1) - 1.f) * 8.f;  // exact: a = (1 + mantissa / 8) 2^(e-1)
  int m = static_cast<int>(std::nearbyint(mantissa));    // ties to even (default rounding mode)
  int biased = e - 1 + 7;
  if (m == 8) {
    m = 0;
    ++biased;
  }
  // a < 448 keeps (biased, m) at or below (15, 6).
  return static_cast<uint8_t>(sign | (biased << 3) | m);
}

float e4m3_to_float(uint8_t code) {
  const int biased = (code >> 3) & 0xf;
  const int m = code & 0x7;
  if (biased == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float v = biased == 0 ? std::ldexp(static_cast<float>(m), -9)
                              : std::ldexp(static_cast<float>(8 + m), biased - 10);
  return (code & 0x80) ? -v : v;
}

Status check_fp8_row(int d, float scale) {
  if (d < 1) return Status::invalid("head_dim", ">= 1", std::to_string(d));
  if (!(scale > 0.f) || !std::isfinite(scale)) {
    return Status::invalid("scale", "a positive finite fp32 scale", std::to_string(scale));
  }
  return Status::success();
}

void quantize_row_fp8(const float* x, int d, float scale, uint8_t* codes) {
  throw_if_error(check_fp8_row(d, scale));
  for (int i = 0; i < d; ++i) codes[i] = float_to_e4m3(x[i] / scale);
}

void dequantize_row_fp8(const uint8_t* codes, int d, float scale, float* x) {
  throw_if_error(check_fp8_row(d, scale));
  for (int i = 0; i < d; ++i) x[i] = scale * e4m3_to_float(codes[i]);
}

// ---- INT8 / INT4 -----------------------------------------------------------------------------------

Status check_int_row(int d, int bits) {
  if (bits != 8 && bits != 4) return Status::invalid("bits", "8 or 4", std::to_string(bits));
  if (d < 1) return Status::invalid("head_dim", ">= 1", std::to_string(d));
  if (bits == 4 && d % 2 != 0) {
    return Status::invalid("head_dim", "an even head dim (INT4 packs two codes a byte)", std::to_string(d));
  }
  return Status::success();
}

namespace {

// min16 + n * s >= target, exactly: min16 and n * s (n <= 255, s an fp16 value) are multiples of
// 2^-24 below 2^25 in magnitude, so the double sum is exact, and so is the comparison with a float.
bool reaches(uint16_t min16, int n, uint16_t scale_bits, float target) {
  return double(fp16_to_float(min16)) + double(n) * double(fp16_to_float(scale_bits)) >= double(target);
}

// The smallest fp16 s in [0, 65504] with min16 + n * s >= max_f, else 65504 (saturated).
uint16_t smallest_reaching_scale(uint16_t min16, int n, float max_f) {
  const double need = (double(max_f) - double(fp16_to_float(min16))) / n;  // close to the answer
  if (!(need > 0.0)) return 0;
  uint16_t s = float_to_fp16(static_cast<float>(need));  // positive: bits grow with the value
  if (s > kFp16MaxFinite) s = kFp16MaxFinite;
  while (s > 0 && reaches(min16, n, static_cast<uint16_t>(s - 1), max_f)) --s;
  while (s < kFp16MaxFinite && !reaches(min16, n, s, max_f)) ++s;
  return s;
}

uint16_t saturating_fp16(float f) {
  uint16_t h = float_to_fp16(f);
  if ((h & 0x7fffu) == 0x7c00u) h = static_cast<uint16_t>((h & 0x8000u) | kFp16MaxFinite);
  if (h == 0x8000u) h = 0;  // -0 -> +0: the bits do not depend on which zero a reduction met first
  return h;
}

}  // namespace

RowScale quantize_row_int(const float* x, int d, int bits, uint8_t* codes_packed) {
  throw_if_error(check_int_row(d, bits));
  const int n = max_code(bits);
  std::memset(codes_packed, 0, static_cast<size_t>(packed_row_bytes(d, bits)));

  float min_f = x[0], max_f = x[0];
  for (int i = 0; i < d; ++i) {
    if (!std::isfinite(x[i])) return {kFp16NaN, kFp16NaN};  // unrepresentable: reads back NaN
    if (x[i] < min_f) min_f = x[i];
    if (x[i] > max_f) max_f = x[i];
  }

  RowScale s;
  s.min_fp16 = saturating_fp16(min_f);
  if (max_f == min_f) return s;  // constant row: scale 0, codes 0, reads back min16
  s.scale_fp16 = smallest_reaching_scale(s.min_fp16, n, max_f);
  if (s.scale_fp16 == 0) return s;  // max <= min16: every value reads back as min16

  const float min16 = fp16_to_float(s.min_fp16);
  const float scale16 = fp16_to_float(s.scale_fp16);
  for (int i = 0; i < d; ++i) {
    float t = std::nearbyint((x[i] - min16) / scale16);  // fp32, ties to even
    t = t < 0.f ? 0.f : (t > float(n) ? float(n) : t);   // clamp before converting (t may be inf)
    const int q = static_cast<int>(t);
    if (bits == 8) {
      codes_packed[i] = static_cast<uint8_t>(q);
    } else {
      codes_packed[i >> 1] = static_cast<uint8_t>(codes_packed[i >> 1] | (q << ((i & 1) * 4)));
    }
  }
  return s;
}

void dequantize_row_int(const uint8_t* codes_packed, int d, int bits, RowScale s, float* x) {
  throw_if_error(check_int_row(d, bits));
  const float scale = fp16_to_float(s.scale_fp16);
  const float min = fp16_to_float(s.min_fp16);
  for (int i = 0; i < d; ++i) {
    x[i] = std::fma(scale, static_cast<float>(unpack_code(codes_packed, i, bits)), min);
  }
}

// ---- bytes per token and KV head ------------------------------------------------------------------

Status check_token_head_bytes(KvFormat format, int d) {
  const int f = static_cast<int>(format);
  if (f < static_cast<int>(KvFormat::kNative) || f > static_cast<int>(KvFormat::kK8V4Kc)) {
    return Status::invalid("kv_format", "a KvFormat value", std::to_string(f));
  }
  if (d < 1) return Status::invalid("head_dim", ">= 1", std::to_string(d));
  const detail::KvFormatTraits t = detail::kv_format_traits(format);
  if (d % 2 != 0 && (t.k_element == DType::kI4 || t.v_element == DType::kI4)) {
    return Status::invalid("head_dim", "an even head dim (INT4 packs two codes a byte)", std::to_string(d));
  }
  return Status::success();
}

TokenHeadBytes token_head_bytes(KvFormat format, int d) {
  throw_if_error(check_token_head_bytes(format, d));
  const detail::KvFormatTraits t = detail::kv_format_traits(format);
  auto data = [d](DType e) { return int64_t(d) * detail::element_traits(e).bits / 8; };
  auto row_scales = [](DType e) -> int64_t { return (e == DType::kI8 || e == DType::kI4) ? 4 : 0; };
  TokenHeadBytes b;
  b.k_data = data(t.k_element);
  b.v_data = data(t.v_element);
  b.k_scales = row_scales(t.k_element);
  b.v_scales = row_scales(t.v_element);
  if (format == KvFormat::kFP8E4M3) b.per_head_scale_bytes = 2 * int64_t(sizeof(float));
  return b;
}

// ---- a strided cache of one INT row format ------------------------------------------------------

Status check_code_strides(int bits, int64_t stride_block, int64_t stride_slot, int64_t stride_head) {
  if (bits != 4) return Status::success();
  const int64_t strides[3] = {stride_block, stride_slot, stride_head};
  const char* names[3] = {"code_stride_block", "code_stride_slot", "code_stride_head"};
  for (int i = 0; i < 3; ++i) {
    if (strides[i] % 2 != 0) {
      return Status::invalid(names[i], "an even stride in INT4 codes (rows start on a byte)", std::to_string(strides[i]));
    }
  }
  return Status::success();
}

Status check_cache_view(const IntCacheView& v) {
  if (Status s = check_int_row(v.head_dim, v.bits); !s.ok()) return s;
  if (v.codes == nullptr) return Status::invalid("codes", "a pointer", "null");
  if (v.scales == nullptr) return Status::invalid("scales", "a pointer", "null");
  return check_code_strides(v.bits, v.code_stride_block, v.code_stride_slot, v.code_stride_head);
}

namespace {

uint8_t* row_codes(const IntCacheView& v, int64_t block, int64_t slot, int64_t head) {
  const int64_t element = block * v.code_stride_block + slot * v.code_stride_slot + head * v.code_stride_head;
  return v.codes + element * v.bits / 8;  // INT4: element is even
}

uint16_t* row_scales(const IntCacheView& v, int64_t block, int64_t slot, int64_t head) {
  return v.scales + block * v.scale_stride_block + head * v.scale_stride_head + slot * v.scale_stride_slot;
}

}  // namespace

RowScale write_cache_row(const IntCacheView& view, int64_t block, int64_t slot, int64_t head,
                         const float* x) {
  throw_if_error(check_cache_view(view));
  const RowScale s = quantize_row_int(x, view.head_dim, view.bits, row_codes(view, block, slot, head));
  uint16_t* pair = row_scales(view, block, slot, head);
  pair[0] = s.scale_fp16;
  pair[1] = s.min_fp16;
  return s;
}

void read_cache_row(const IntCacheView& view, int64_t block, int64_t slot, int64_t head, float* x) {
  throw_if_error(check_cache_view(view));
  const uint16_t* pair = row_scales(view, block, slot, head);
  dequantize_row_int(row_codes(view, block, slot, head), view.head_dim, view.bits, {pair[0], pair[1]}, x);
}

}  // namespace splitkv::quant
