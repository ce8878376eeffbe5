// The append kernels' arithmetic: the host quantizer's rules (src/quant/kv_quant_host.cpp) on a
// warp's values, bit for bit, and the aligned vector copies they use. Shared by the row kernel
// (append_kv_kernel.cuh) and the *_kc group kernel (append_kc_groups_kernel.cuh).
//
// Bit-exactness rests on IEEE operations with explicit rounding: __fsub_rn / __fdiv_rn (never a
// reciprocal or a contraction), rintf (ties to even), __float2half_rn, and an exact fp64
// comparison for the scale search. The build does not use -use_fast_math or -ftz; the _rn
// intrinsics keep the ops separate whatever the contraction setting.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace splitkv::detail {
namespace append {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr uint16_t kFp16NaN = 0x7e00;         // quant::kFp16NaN
constexpr uint16_t kFp16MaxFinite = 0x7bff;   // quant::kFp16MaxFinite, 65504
constexpr uint8_t kE4M3NaN = 0x7f;            // quant::kE4M3NaN

// An integer type of kBytes, for one aligned vector access.
template <int kBytes> struct Vec;
template <> struct Vec<1> { using Type = uint8_t; };
template <> struct Vec<2> { using Type = uint16_t; };
template <> struct Vec<4> { using Type = uint32_t; };
template <> struct Vec<8> { using Type = uint2; };
template <> struct Vec<16> { using Type = uint4; };

template <int kBytes>
__device__ __forceinline__ void copy_vec(void* dst, const void* src) {
  using T = typename Vec<kBytes>::Type;
  *static_cast<T*>(dst) = *static_cast<const T*>(src);
}

template <class In>
__device__ __forceinline__ float to_float(uint16_t bits) {  // exact
  if constexpr (std::is_same_v<In, __half>) {
    return __half2float(__ushort_as_half(bits));
  } else {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  }
}

__device__ __forceinline__ float fp16_value(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

// Host: saturating_fp16. Nearest even, +-inf -> +-65504, -0 -> +0.
__device__ __forceinline__ uint16_t saturating_fp16(float f) {
  uint16_t h = __half_as_ushort(__float2half_rn(f));
  if ((h & 0x7fffu) == 0x7c00u) h = static_cast<uint16_t>((h & 0x8000u) | kFp16MaxFinite);
  if (h == 0x8000u) h = 0;
  return h;
}

// Host: reaches. min16 + n * s >= target exactly: both terms are multiples of 2^-24 below 2^25 in
// magnitude, so the fp64 product and sum are exact (an FMA would give the same bits).
__device__ __forceinline__ bool reaches(double min16, int n, uint16_t scale_bits, float target) {
  return __dadd_rn(min16, __dmul_rn(double(n), double(fp16_value(scale_bits)))) >= double(target);
}

// Host: smallest_reaching_scale. The smallest fp16 s in [0, 65504] with min16 + n * s >= max_f,
// else 65504. The starting guess only decides how many steps the two loops take; the result is
// the unique answer of the exact comparison.
__device__ __forceinline__ uint16_t smallest_reaching_scale(uint16_t min16_bits, int n, float max_f) {
  const double min16 = fp16_value(min16_bits);
  const double need = __ddiv_rn(__dsub_rn(double(max_f), min16), double(n));
  if (!(need > 0.0)) return 0;
  uint16_t s = __half_as_ushort(__float2half_rn(__double2float_rn(need)));  // positive: bits grow with the value
  if (s > kFp16MaxFinite) s = kFp16MaxFinite;
  while (s > 0 && reaches(min16, n, static_cast<uint16_t>(s - 1), max_f)) --s;
  while (s < kFp16MaxFinite && !reaches(min16, n, s, max_f)) ++s;
  return s;
}

// Host: quantize_row_int over the warp's 32 * kPerLane values (any assignment to lanes): the codes
// of the lane's values and the (scale, min) pair, the same in every lane.
template <int kBits, int kPerLane>
__device__ __forceinline__ void quantize_int_values(const float (&x)[kPerLane], uint8_t (&q)[kPerLane],
                                                    uint16_t& scale16, uint16_t& min16) {
  constexpr int kN = (1 << kBits) - 1;
  bool finite = true;
  float lo = x[0], hi = x[0];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    finite &= isfinite(x[i]);
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) q[i] = 0;
  scale16 = kFp16NaN, min16 = kFp16NaN;  // values with NaN or +-inf read back NaN, codes 0
  if (__all_sync(kFullMask, finite)) {
    // min and max are exact in any order; a -0 / +0 difference disappears in saturating_fp16.
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      lo = fminf(lo, __shfl_xor_sync(kFullMask, lo, offset));
      hi = fmaxf(hi, __shfl_xor_sync(kFullMask, hi, offset));
    }
    min16 = saturating_fp16(lo);
    scale16 = hi == lo ? 0 : smallest_reaching_scale(min16, kN, hi);  // constant row: scale 0, codes 0
    if (scale16 != 0) {
      const float min_f = fp16_value(min16), scale_f = fp16_value(scale16);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        // fp32 subtraction and IEEE division, ties to even, clamped before the conversion.
        const float t = fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(x[i], min_f), scale_f)), 0.f), float(kN));
        q[i] = static_cast<uint8_t>(t);
      }
    }
  }
}

// Host: quantize_row_int for the warp's row, lane holding x[lane * kPerLane, +kPerLane). Writes the
// lane's packed codes to `codes` (the lane's part of the row) and, from lane 0, the (scale, min)
// pair (scale at the lower address).
template <int kBits, int kPerLane>
__device__ __forceinline__ void quantize_int_row(const float (&x)[kPerLane], int lane, char* codes, uint16_t* pair) {
  alignas(16) uint8_t q[kPerLane];
  uint16_t scale16, min16;
  quantize_int_values<kBits, kPerLane>(x, q, scale16, min16);
  if constexpr (kBits == 8) {
    copy_vec<kPerLane>(codes + lane * kPerLane, q);
  } else {  // element 2i in the low nibble of byte i
    alignas(8) uint8_t packed[kPerLane / 2];
#pragma unroll
    for (int j = 0; j < kPerLane / 2; ++j) packed[j] = static_cast<uint8_t>(q[2 * j] | (q[2 * j + 1] << 4));
    copy_vec<kPerLane / 2>(codes + lane * (kPerLane / 2), packed);
  }
  if (lane == 0) *reinterpret_cast<uint32_t*>(pair) = uint32_t(scale16) | (uint32_t(min16) << 16);
}

// Host: float_to_e4m3(x / scale). The NaN case is explicit so sm_80 (software conversion) and
// sm_89+ (cvt.rn.satfinite.e4m3x2.f32) give 0x7f whatever the NaN's sign. A scale that is not
// positive and finite cannot be rejected on the host (it is device data): its rows become NaN.
template <int kPerLane>
__device__ __forceinline__ void quantize_fp8_row(const float (&x)[kPerLane], int lane, float scale, char* codes) {
  const bool scale_ok = scale > 0.f && isfinite(scale);
  alignas(16) uint8_t q[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float f = __fdiv_rn(x[i], scale);
    q[i] = (!scale_ok || isnan(f)) ? kE4M3NaN : static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
  }
  copy_vec<kPerLane>(codes + lane * kPerLane, q);
}

}  // namespace append

}  // namespace splitkv::detail
