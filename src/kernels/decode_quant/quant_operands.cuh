// The MMA operands of the quantized-cache decode kernel, built in registers (m16n8k16, fp16):
//
// Q (A operand, once per block). The head-dim order inside a score dot product is free, so it is
// chosen to suit K: thread (g, c) = (lane / 4, lane % 4) multiplies a contiguous run of D/4 codes
// of its key, and its Q registers hold the matching columns (k_pair_column). Q is shifted by a
// power of two into fp16's range before rounding (bf16 reaches 3e38, fp16 65504); the shift comes
// back out through the softmax scale.
//
// K (B operand): thread (g, c) reads codes of keys g and g + 8 with plain 16-byte loads and turns
// each 32-bit word into operand pairs (k_pair). INT codes enter the MMA as 1024 + w * code, exact,
// with w = 16 for the INT4 pairs masked in bits 4-7 and 1 otherwise; Q's registers of those pairs
// hold q / 16, so the raw score is sum(q * code) + 1024 * sum(a) over the register values a. The
// score is fixed afterwards per key: s = scale * (raw - 1024 * sum(a)) + min * sum(q) (fold_k_scales).
//
// V (B operand of P V): ldmatrix .trans on 16-bit units of codes gives each thread two adjacent
// keys of one unit, which is the operand pair an MMA needs; the columns of O then come out
// permuted (o_column maps them back), and INT codes are dequantized by one fp16 fma per pair.
#pragma once

#include <cuda_fp16.h>

#include <cute/arch/copy_sm75.hpp>
#include <cute/tensor.hpp>

#include "kernels/decode_quant/kv_codes.cuh"
#include "kernels/decode_quant/quant_decode_traits.cuh"

namespace splitkv::detail {

// ---- Q -------------------------------------------------------------------------------------------

// The power-of-two shift that brings a Q tile into fp16's range: max |q| over the tile's kElements
// (row-major in shared memory) lands in [2^13, 2^14) when it is outside [2^-10, 2^14]; values of a
// row that are tiny next to its largest lose bits they could not have contributed anyway. Every
// warp computes it alike, so no block barrier is needed.
template <int kElements, class Element>
__device__ __forceinline__ int q_tile_shift(const Element* sQ, int lane);

// max |q| over the tile (every lane gets it).
template <int kElements, class Element>
__device__ __forceinline__ float q_tile_max_abs(const Element* sQ, int lane) {
  float max_abs = 0.f;
  for (int i = lane * 8; i < kElements; i += 32 * 8) {
    const uint4 chunk = *reinterpret_cast<const uint4*>(sQ + i);
    const Element* x = reinterpret_cast<const Element*>(&chunk);
#pragma unroll
    for (int j = 0; j < 8; ++j) max_abs = fmaxf(max_abs, fabsf(float(x[j])));
  }
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) max_abs = fmaxf(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, m));
  return max_abs;
}

// The shift of a tile whose max |q| is max_abs (q_tile_shift).
__device__ __forceinline__ int q_shift_of(float max_abs) {
  int shift = 0;
  if (max_abs > 0.f && max_abs <= 3.0e38f && (max_abs > 16384.f || max_abs < 1.f / 1024.f)) {
    int exponent;
    frexpf(max_abs, &exponent);  // max_abs < 2^exponent
    shift = 14 - exponent;
  }
  return shift;
}

template <int kElements, class Element>
__device__ __forceinline__ int q_tile_shift(const Element* sQ, int lane) {
  return q_shift_of(q_tile_max_abs<kElements>(sQ, lane));
}

template <class Traits>
struct QuantQFragment {
  static constexpr int D = Traits::kHeadDim;
  static constexpr int kSteps = D / 16;  // MMA k-steps
  uint32_t a[kSteps][4];  // A registers per k-step
  float q_sum[2];         // rows g and g + 8: sum of the row's fp16 values (for the INT K fix-up)
  float a_offset[2];      // -1024 * sum of the row's register values (q / w; for the INT K fix-up)
  float unshift;          // 2^-shift: scores times this are in units of the original Q

  // sQ: the block's Q tile, row-major [16][D] in shared memory (rows past the block's rows are 0).
  __device__ __forceinline__ void load(const typename Traits::Element* sQ, int lane) {
    using Element = typename Traits::Element;
    const int shift = q_tile_shift<16 * D>(sQ, lane);
    const float scale = ldexpf(1.f, shift);
    unshift = ldexpf(1.f, -shift);

    const int g = lane / 4, c = lane % 4;
    const int col0 = c * (D / 4);
    float a_sum[2] = {0.f, 0.f};
    q_sum[0] = q_sum[1] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // pair 2kk (a0, a1) and 2kk + 1 (a2, a3)
        const int pair = 2 * kk + h;
        const int c0 = col0 + k_pair_column<Traits::kKCode>(pair, 0);
        const int c1 = col0 + k_pair_column<Traits::kKCode>(pair, 1);
        const float weight = float(k_pair_weight<Traits::kKCode>(pair % Traits::KCode::kPairsPerWord));
        const float pair_scale = scale / weight;  // a power of two: exact
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const Element* row = sQ + (g + 8 * r) * D;
          const __half2 q2 = __floats2half2_rn(float(row[c0]) * pair_scale, float(row[c1]) * pair_scale);
          a[kk][2 * h + r] = as_u32(q2);
          const float2 back = __half22float2(q2);
          a_sum[r] += back.x + back.y;
          q_sum[r] += (back.x + back.y) * weight;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int m = 1; m <= 2; m *= 2) {
        q_sum[r] += __shfl_xor_sync(0xffffffffu, q_sum[r], m);
        a_sum[r] += __shfl_xor_sync(0xffffffffu, a_sum[r], m);
      }
      a_offset[r] = -1024.f * a_sum[r];
    }
  }
};

// ---- K -------------------------------------------------------------------------------------------

// Where a lane reads in a ring stage, worked out once per block: its K codes (keys g and g + 8, a
// run of D/4 codes each, in vectors of up to 16 bytes) and its ldmatrix row of each pair of V
// chunks (see quant_accumulate_pv).
template <class Traits>
struct QuantLaneReads {
  static constexpr int kKRunBytes = Traits::kKRowBytes / 4;  // one thread's codes of one key
  static constexpr int kKVecBytes = kKRunBytes < 16 ? kKRunBytes : 16;
  static constexpr int kKVecs = kKRunBytes / kKVecBytes;
  static constexpr int kVPairs = Traits::kVRowBytes / 32;  // ldmatrix.x4 per sub-tile
  int k[2][kKVecs];
  int v[kVPairs];

  __device__ __forceinline__ explicit QuantLaneReads(int lane) {
    const int g = lane / 4, c = lane % 4;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int i = 0; i < kKVecs; ++i) {
        k[n][i] = code_offset<Traits::kKRowBytes>(g + 8 * n, c * kKRunBytes + i * kKVecBytes);
      }
    }
    // ldmatrix.x4.trans over chunks (2t, 2t + 1): matrix m = lane / 8 holds keys 8 (m % 2) + 0..7
    // of chunk 2t + m / 2; a lane supplies the address of key lane % 8 of its matrix.
    const int m = lane / 8, key = (m % 2) * 8 + lane % 8;
#pragma unroll
    for (int t = 0; t < kVPairs; ++t) v[t] = Traits::kVOffset + code_offset<Traits::kVRowBytes>(key, (2 * t + m / 2) * 16);
  }
};

// The thread's code words of keys g and g + 8 in ring stage `stage` (its K run of each, as stored).
template <class Traits>
__device__ __forceinline__ void read_key_code_words(const char* stage, const QuantLaneReads<Traits>& reads,
                                                    uint32_t (&words)[2][QuantLaneReads<Traits>::kKRunBytes / 4]) {
  using Reads = QuantLaneReads<Traits>;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
#pragma unroll
    for (int v = 0; v < Reads::kKVecs; ++v) {
      const char* at = stage + reads.k[n][v];
      if constexpr (Reads::kKVecBytes == 16) {
        const uint4 x = *reinterpret_cast<const uint4*>(at);
        words[n][4 * v + 0] = x.x, words[n][4 * v + 1] = x.y, words[n][4 * v + 2] = x.z, words[n][4 * v + 3] = x.w;
      } else {
        const uint2 x = *reinterpret_cast<const uint2*>(at);
        words[n][2 * v + 0] = x.x, words[n][2 * v + 1] = x.y;
      }
    }
  }
}

// S (16 rows x 16 keys, fp32 C fragment acc_s) = Q . codes^T for the sub-tile in ring stage `stage`.
template <class Traits, class AccS>
__device__ __forceinline__ void quant_scores(const QuantQFragment<Traits>& q, const char* stage,
                                             const QuantLaneReads<Traits>& reads, AccS& acc_s) {
  using KCode = typename Traits::KCode;
  using Reads = QuantLaneReads<Traits>;
  uint32_t words[2][Reads::kKRunBytes / 4];  // keys g and g + 8
  read_key_code_words<Traits>(stage, reads, words);
#pragma unroll
  for (int kk = 0; kk < QuantQFragment<Traits>::kSteps; ++kk) {
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      constexpr int kPairs = KCode::kPairsPerWord;
      const uint32_t b0 = k_pair<Traits::kKCode>(words[n][(2 * kk) / kPairs], (2 * kk) % kPairs);
      const uint32_t b1 = k_pair<Traits::kKCode>(words[n][(2 * kk + 1) / kPairs], (2 * kk + 1) % kPairs);
      Traits::MmaOp::fma(acc_s(0, 0, n), acc_s(1, 0, n), acc_s(2, 0, n), acc_s(3, 0, n), q.a[kk][0], q.a[kk][1],
                         q.a[kk][2], q.a[kk][3], b0, b1, acc_s(0, 0, n), acc_s(1, 0, n), acc_s(2, 0, n),
                         acc_s(3, 0, n));
    }
  }
}

// INT K: raw scores over 1024 + w * code become scores over the dequantized keys,
//   q . (scale * code + min) = scale * (raw - 1024 * sum(a)) + min * sum(q),
// with the (scale, min) words of the sub-tile's keys at `k_scales` (fp32 arithmetic). Where every
// weight is 1 (INT8), sum(a) = sum(q) and the two terms share one product.
template <class Traits, class AccS>
__device__ __forceinline__ void fold_k_scales(const QuantQFragment<Traits>& q, const char* k_scales, int lane,
                                              AccS& acc_s) {
  const int c = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const uint2 words = *reinterpret_cast<const uint2*>(k_scales + (8 * n + 2 * c) * 4);  // keys 8n+2c, +1
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 scale_min = __half22float2(as_half2(i % 2 == 0 ? words.x : words.y));
      const int r = i / 2;
      const float bias = Traits::kKCode == CodeKind::kInt4
                             ? fmaf(scale_min.y, q.q_sum[r], scale_min.x * q.a_offset[r])
                             : (scale_min.y - 1024.f * scale_min.x) * q.q_sum[r];
      acc_s(i, 0, n) = fmaf(scale_min.x, acc_s(i, 0, n), bias);
    }
  }
}

// ---- V -------------------------------------------------------------------------------------------

// Head-dim column held by accumulator column `col` of O: atom a = col / 8 of chunk a / U covers
// columns chunk * 8U + U * n + j (U codes per 16-bit unit, j = a % U, n = col % 8).
template <class Traits>
struct QuantOColumns {
  static constexpr int U = 16 / Traits::VCode::kBits;
  __device__ __forceinline__ int operator()(int col) const {
    const int atom = col / 8, n = col % 8;
    return atom / U * 8 * U + U * n + atom % U;
  }
};

// The (scale, min) of key k in fp32.
__device__ __forceinline__ float2 key_scale_min(const char* scales, int key) {
  return __half22float2(as_half2(*reinterpret_cast<const uint32_t*>(scales + key * 4)));
}

// The (scale, min) of keys (k, k + 1) as two half2: (scale_k, scale_k+1), (min_k, min_k+1).
__device__ __forceinline__ void key_pair_scales(const char* scales, int key, uint32_t& scale2, uint32_t& min2) {
  const uint2 words = *reinterpret_cast<const uint2*>(scales + key * 4);
  scale2 = __byte_perm(words.x, words.y, 0x5410);
  min2 = __byte_perm(words.x, words.y, 0x7632);
}

// acc_o (16 x D, fp32 C fragment, columns permuted as QuantOColumns says) += P . V for the
// sub-tile in ring stage `stage`; P is the softmax'ed acc_s.
template <class Traits, class AccS, class AccO>
__device__ __forceinline__ void quant_accumulate_pv(const AccS& acc_s, const char* stage,
                                                    const QuantLaneReads<Traits>& reads, int lane, AccO& acc_o) {
  constexpr int U = QuantOColumns<Traits>::U;
  const char* v_scales = stage + Traits::kVScaleOffset;
  const int c = lane % 4;
  const uint32_t p[4] = {as_u32(__floats2half2_rn(acc_s(0, 0, 0), acc_s(1, 0, 0))),
                         as_u32(__floats2half2_rn(acc_s(2, 0, 0), acc_s(3, 0, 0))),
                         as_u32(__floats2half2_rn(acc_s(0, 0, 1), acc_s(1, 0, 1))),
                         as_u32(__floats2half2_rn(acc_s(2, 0, 1), acc_s(3, 0, 1)))};
  uint32_t scale_lo = 0, min_lo = 0, scale_hi = 0, min_hi = 0;  // keys (2c, 2c+1) and (8+2c, 9+2c)
  if constexpr (Traits::kTokenScales) {
    key_pair_scales(v_scales, 2 * c, scale_lo, min_lo);
    key_pair_scales(v_scales, 8 + 2 * c, scale_hi, min_hi);
  }
#pragma unroll
  for (int t = 0; t < QuantLaneReads<Traits>::kVPairs; ++t) {
    uint32_t r[4];
    const char* addr = stage + reads.v[t];
    cute::SM75_U16x8_LDSM_T::copy(*reinterpret_cast<const cute::uint128_t*>(addr), r[0], r[1], r[2], r[3]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // chunk 2t + h: keys 0-7 in r[2h], keys 8-15 in r[2h + 1]
#pragma unroll
      for (int j = 0; j < U; ++j) {
        const int atom = (2 * t + h) * U + j;
        const uint32_t b0 = v_pair<Traits::kVCode>(v_pair_codes<Traits::kVCode>(r[2 * h], j), scale_lo, min_lo);
        const uint32_t b1 = v_pair<Traits::kVCode>(v_pair_codes<Traits::kVCode>(r[2 * h + 1], j), scale_hi, min_hi);
        Traits::MmaOp::fma(acc_o(0, 0, atom), acc_o(1, 0, atom), acc_o(2, 0, atom), acc_o(3, 0, atom), p[0], p[1],
                           p[2], p[3], b0, b1, acc_o(0, 0, atom), acc_o(1, 0, atom), acc_o(2, 0, atom),
                           acc_o(3, 0, atom));
      }
    }
  }
}

}  // namespace splitkv::detail
