// Codes of a quantized KV cache turned into fp16 MMA operands, in registers (docs/KV_FORMATS.md
// defines the codes). Two fp16 values travel in one 32-bit register (an MMA operand pair), so
// every conversion here makes pairs.
//
// Integer codes become fp16 by the "magic number" trick: the bits 0x6400 | x are the fp16 number
// 1024 + x for any x < 1024, exactly. INT4 codes are masked where they lie, without a shift: a
// nibble in bits 0-3 of a half gives 1024 + code, one in bits 4-7 gives 1024 + 16 * code (also
// exact), so four pairs of a word cost one shift and four instructions that mask and insert the
// magic at once (lop3). K keeps the offset and the factor 16 (the Q fragment and the score
// correction in quant_operands.cuh account for both); V turns each pair back into its codes
// before the dequantizing fma.
//
// kNative16 is the cache in the Q/O dtype itself (fp16 or bf16): a 32-bit word already is an operand
// pair, so nothing is converted; the keys-as-rows kernel reads such a cache with its own K path
// (ldmatrix, quant_keys_as_rows.cuh) and the V pairs below pass through unchanged.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "common/formats.hpp"

namespace splitkv::detail {

template <CodeKind kKind>
struct CodeTraits {
  static constexpr int kBits = kKind == CodeKind::kInt4 ? 4 : (kKind == CodeKind::kNative16 ? 16 : 8);
  static constexpr int kCodesPerWord = 32 / kBits;
  static constexpr int kPairsPerWord = kCodesPerWord / 2;
};

constexpr uint32_t kMagic1024x2 = 0x64006400u;  // half2(1024, 1024)
constexpr uint32_t kLowNibbles = 0x000f000fu;    // bits 0-3 of each half
constexpr uint32_t kHighNibbles = 0x00f000f0u;   // bits 4-7 of each half

// (x & mask) | kMagic1024x2 in one instruction. The compiler splits the C++ expression into two
// (a LOP3 takes one immediate), so the magic lives in a register here.
template <uint32_t kMask>
__device__ __forceinline__ uint32_t mask_into_magic(uint32_t x) {
  uint32_t y;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(y) : "r"(x), "n"(kMask), "r"(kMagic1024x2));  // (a & b) | c
  return y;
}

// INT4 pair j (0-3) of a 32-bit word whose halves hold four nibbles each: nibbles (j, j + 4) of the
// word, as 1024 + code (even j) or 1024 + 16 * code (odd j). The shift by 8 is shared by j = 2, 3.
__device__ __forceinline__ uint32_t int4_pair(uint32_t word, int j) {
  const uint32_t w = j < 2 ? word : word >> 8;
  return j % 2 == 0 ? mask_into_magic<kLowNibbles>(w) : mask_into_magic<kHighNibbles>(w);
}

// Code weight of INT4 pair j as int4_pair returns it: 1 or 16.
__host__ __device__ constexpr int int4_pair_weight(int j) { return j % 2 == 0 ? 1 : 16; }

// INT4 pair j as fp16 subnormals, without the magic: a half whose bits are w * code (w = 1 or 16,
// below 1024) is the fp16 number w * code * 2^-24, exactly, and the tensor cores multiply
// subnormal fp16 operands exactly. An operand made like this costs one instruction (the mask) where
// the magic's costs two (mask, then take 1024 back out); the MMA's accumulator is then the true sum
// times 2^-24 / w, which int4_subnormal_unscale(j) undoes exactly (a power of two). Only for
// operands whose products need no fp16 arithmetic before the MMA (a V scale folded into P).
__device__ __forceinline__ uint32_t int4_pair_subnormal(uint32_t word, int j) {
  const uint32_t w = j < 2 ? word : word >> 8;
  return w & (j % 2 == 0 ? kLowNibbles : kHighNibbles);
}
__host__ __device__ constexpr float int4_subnormal_unscale(int j) { return j % 2 == 0 ? 16777216.f : 1048576.f; }

__device__ __forceinline__ uint32_t as_u32(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 as_half2(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }

// Two e4m3 codes (low byte -> low half) as half2, exactly (every e4m3 value is an fp16 value).
__device__ __forceinline__ uint32_t e4m3x2_to_half2(uint32_t two_codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

// ---- K: pair j of a 32-bit word of one key's codes ---------------------------------------------------
// Which codes of the word form pair j is part of the layout contract with the Q fragment
// (quant_q_fragment.cuh, k_pair_column): 8-bit codes pair bytes (2j, 2j+1); INT4 codes pair
// nibbles (j, j + 4) (int4_pair).
//   fp8:  the two values, exact.
//   int8: 1024 + code, exact.
//   int4: 1024 + int4_pair_weight(j) * code, exact.
template <CodeKind kKind>
__device__ __forceinline__ uint32_t k_pair(uint32_t word, int j) {
  if constexpr (kKind == CodeKind::kFp8) {
    return e4m3x2_to_half2(word >> (16 * j));
  } else if constexpr (kKind == CodeKind::kInt8) {
    return __byte_perm(word, kMagic1024x2, j == 0 ? 0x7170 : 0x7372);  // bytes [2j, 0x64, 2j+1, 0x64]
  } else {
    return int4_pair(word, j);
  }
}

// Code weight w of K pair j of a word (k_pair gives 1024 + w * code for integer codes).
template <CodeKind kKind>
__host__ __device__ constexpr int k_pair_weight(int j) {
  return kKind == CodeKind::kInt4 ? int4_pair_weight(j) : 1;
}

// Column (within the thread's contiguous run of a key's codes) of element e (0, 1) of pair p,
// where pairs are numbered word by word: the inverse of k_pair.
template <CodeKind kKind>
__host__ __device__ constexpr int k_pair_column(int p, int e) {
  if constexpr (kKind == CodeKind::kInt4) {
    return 8 * (p / 4) + p % 4 + 4 * e;
  } else {
    return 2 * p + e;
  }
}

// ---- V: codes of two adjacent keys from ldmatrix.trans ------------------------------------------------
// ldmatrix .trans on 16-bit units hands a thread one register holding two keys (2c: low half,
// 2c + 1: high half) of one 16-bit unit of codes: two 8-bit codes or four INT4 codes each. Pair j
// is code j of that unit for both keys: exactly the (k, k + 1) operand pair of an MMA B fragment
// whose column is that code's head-dim index. Integer codes come back as the codes themselves
// (exact small fp16 integers): 1024 + code less 1024, or (1024 + 16 * code) / 16 less 64 in one fma.
template <CodeKind kKind>
__device__ __forceinline__ uint32_t v_pair_codes(uint32_t two_keys, int j) {
  if constexpr (kKind == CodeKind::kNative16) {
    return two_keys;  // one unit is one value: the pair of keys (2c, 2c + 1) as stored
  } else if constexpr (kKind == CodeKind::kFp8) {
    return e4m3x2_to_half2(__byte_perm(two_keys, 0, j == 0 ? 0x4420 : 0x4431));  // bytes (j, j + 2)
  } else if constexpr (kKind == CodeKind::kInt8) {
    const uint32_t biased = __byte_perm(two_keys, kMagic1024x2, j == 0 ? 0x7270 : 0x7371);  // 1024 + code
    return as_u32(__hsub2(as_half2(biased), as_half2(kMagic1024x2)));
  } else {
    const uint32_t biased = int4_pair(two_keys, j);
    if (int4_pair_weight(j) == 1) return as_u32(__hsub2(as_half2(biased), as_half2(kMagic1024x2)));
    return as_u32(__hfma2(as_half2(biased), __float2half2_rn(1.f / 16.f), __float2half2_rn(-64.f)));
  }
}

// A V operand pair from v_pair_codes: fp8 and 16-bit values as they are (fp8's per-head scale
// multiplies the output); integer codes dequantized, x = scale * code + min, with (scale, min) of
// the pair's two keys (one fp16 rounding).
template <CodeKind kKind>
__device__ __forceinline__ uint32_t v_pair(uint32_t codes, uint32_t scale2, uint32_t min2) {
  if constexpr (kKind == CodeKind::kFp8 || kKind == CodeKind::kNative16) {
    return codes;
  } else {
    return as_u32(__hfma2(as_half2(codes), as_half2(scale2), as_half2(min2)));
  }
}

}  // namespace splitkv::detail
