// Codes of a quantized KV cache turned into fp16 MMA operands, in registers (docs/KV_FORMATS.md
// defines the codes). Two fp16 values travel in one 32-bit register (an MMA operand pair), so
// every conversion here makes pairs.
//
// Integer codes become fp16 by the "magic number" trick: the bits 0x6400 | x are the fp16 number
// 1024 + x for any x < 1024, exactly. K keeps the +1024 (the score correction in
// quant_decode_path.cuh removes it); V subtracts it before the dequantizing fma.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace splitkv::detail {

enum class CodeKind { kFp8, kInt8, kInt4 };

template <CodeKind kKind>
struct CodeTraits {
  static constexpr int kBits = kKind == CodeKind::kInt4 ? 4 : 8;
  static constexpr int kCodesPerWord = 32 / kBits;
  static constexpr int kPairsPerWord = kCodesPerWord / 2;
};

constexpr uint32_t kMagic1024x2 = 0x64006400u;  // half2(1024, 1024)

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
// nibbles (j, j + 4), which one mask extracts.
//   fp8:        the two values, exact.
//   int8, int4: 1024 + code, exact.
template <CodeKind kKind>
__device__ __forceinline__ uint32_t k_pair(uint32_t word, int j) {
  if constexpr (kKind == CodeKind::kFp8) {
    return e4m3x2_to_half2(word >> (16 * j));
  } else if constexpr (kKind == CodeKind::kInt8) {
    return __byte_perm(word, kMagic1024x2, j == 0 ? 0x7170 : 0x7372);  // bytes [2j, 0x64, 2j+1, 0x64]
  } else {
    return ((word >> (4 * j)) & 0x000f000fu) | kMagic1024x2;
  }
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
// whose column is that code's head-dim index.
template <CodeKind kKind>
__device__ __forceinline__ uint32_t v_pair_codes(uint32_t two_keys, int j) {
  if constexpr (kKind == CodeKind::kFp8) {
    return e4m3x2_to_half2(__byte_perm(two_keys, 0, j == 0 ? 0x4420 : 0x4431));  // bytes (j, j + 2)
  } else if constexpr (kKind == CodeKind::kInt8) {
    return __byte_perm(two_keys, kMagic1024x2, j == 0 ? 0x7270 : 0x7371);  // 1024 + code
  } else {
    return ((two_keys >> (4 * j)) & 0x000f000fu) | kMagic1024x2;
  }
}

// A V operand pair from its codes: fp8 values as they are (the per-head scale multiplies the
// output); integer codes dequantized, x = scale * code + min, with (scale, min) of the pair's two
// keys (one fp16 rounding).
template <CodeKind kKind>
__device__ __forceinline__ uint32_t v_pair(uint32_t codes, uint32_t scale2, uint32_t min2) {
  if constexpr (kKind == CodeKind::kFp8) {
    return codes;
  } else {
    const __half2 code = __hsub2(as_half2(codes), as_half2(kMagic1024x2));
    return as_u32(__hfma2(code, as_half2(scale2), as_half2(min2)));
  }
}

}  // namespace splitkv::detail
