// The quantized-cache decode with the keys as the MMA's rows (m16n8k16, fp16), for KV heads with at
// most 8 packed query rows (GQA 4 or 8 at q_len 1): S^T (16 keys x 8 rows) = K Q^T and O^T (D x 8
// rows) = V^T P^T. Today's kernel (quant_operands.cuh) puts the rows on the MMA's M side, where a
// 16-row tile carries 4 real rows at GQA 4; here the rows sit on N (8 wide), so a sub-tile takes half
// the MMAs, half the exponentials, and O^T holds half the registers. The codes are read and turned
// into operand pairs exactly as in quant_operands.cuh (same pairs, other fragment slots):
// - K is the A operand: thread (g, c) holds keys g and g + 8 at the k-step's pairs 2kk (columns
//   2c, 2c+1) and 2kk + 1 (2c+8, 2c+9), the same four pairs per k-step as the two B operands of
//   today's kernel. Q is the B operand: row g at the same pairs.
// - Scores: thread (g, c) holds keys g, g + 8 of rows 2c, 2c + 1; a row's maximum and sum reduce
//   over g (lanes 4 apart).
// - P^T (B operand of O^T) needs keys along c: movmatrix.trans on the packed fp16 probabilities of
//   keys 0-7 and 8-15 gives b0 and b1.
// - V^T is the A operand: the ldmatrix.x4.trans of chunks (2t, 2t+1) hands thread (g, c) keys
//   (2c, 2c+1) and (2c+8, 2c+9) of unit g of both chunks, so pair j of r[0], r[2], r[1], r[3] is
//   a0..a3 of an m-tile whose 16 head-dim rows are (chunk 2t or 2t + 1, unit g, code j).
// A 16-bit cache (Traits::kNative) takes the same path with one value per unit, in its own dtype:
// K's A fragment is then a plain ldmatrix.x4 per k-step (the lanes' addresses are those of the V
// reads), Q's B fragment holds row g's columns 2c, 2c+1 and 2c+8, 2c+9 of the k-step, unshifted.
#pragma once

#include <cuda_fp16.h>

#include <type_traits>

#include <cute/arch/copy_sm75.hpp>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/decode_quant/kv_codes.cuh"
#include "kernels/decode_quant/quant_operands.cuh"

namespace splitkv::detail {

constexpr int kKeysAsRowsQueries = 8;  // packed query rows per block (the MMA's N)

// ---- Q as the B operand ---------------------------------------------------------------------------

// Keys per channel with fp16 Q: the folded Q operand is held as two fp16 halves (build_kc_group_q),
// since one fp16 rounding of q~ scale moves a score by as much as fp16's own rounding of the keys.
// With bf16 Q, whose rounding is 8 times coarser, one half is enough.
template <class Traits>
constexpr bool kc_split_q() {
  return Traits::kChannelKeys && std::is_same_v<typename Traits::Element, cutlass::half_t>;
}

template <class Traits>
struct KeysAsRowsQ {
  static constexpr int D = Traits::kHeadDim;
  static constexpr int kSteps = D / 16;
  uint32_t b[kSteps][2];  // row g at pairs 2kk and 2kk + 1
  uint32_t b_lo[kSteps][2];  // kc_split_q: what b's fp16 rounding left (build_kc_group_q)
  float q_sum[2];         // rows 2c, 2c + 1: sum of the row's effective fp16 values (INT K fix-up)
  float a_offset[2];      // rows 2c, 2c + 1: -1024 * sum of the row's register values
  float unshift;          // 2^-shift

  // sQ: row-major [8][D] (rows past the block's rows are 0).
  template <class Element>
  __device__ __forceinline__ void load(const Element* sQ, int lane) {
    if constexpr (Traits::kNative) {
      load_native(sQ, lane);
    } else {
      load_codes(sQ, lane);
    }
  }

  // 16-bit K: Q as stored (the MMA's own dtype), the standard B fragment.
  template <class Element>
  __device__ __forceinline__ void load_native(const Element* sQ, int lane) {
    unshift = 1.f;
    const int g = lane / 4, c = lane % 4;
    const Element* row = sQ + g * D;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) b[kk][h] = *reinterpret_cast<const uint32_t*>(row + 16 * kk + 8 * h + 2 * c);
    }
  }

  template <class Element>
  __device__ __forceinline__ void load_codes(const Element* sQ, int lane) {
    const int shift = q_tile_shift<kKeysAsRowsQueries * D>(sQ, lane);
    const float scale = ldexpf(1.f, shift);
    unshift = ldexpf(1.f, -shift);

    const int g = lane / 4, c = lane % 4;
    const int col0 = c * (D / 4);
    const Element* row = sQ + g * D;
    float a_sum = 0.f, sum = 0.f;  // row g, this thread's columns
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int pair = 2 * kk + h;
        const int c0 = col0 + k_pair_column<Traits::kKCode>(pair, 0);
        const int c1 = col0 + k_pair_column<Traits::kKCode>(pair, 1);
        const float weight = float(k_pair_weight<Traits::kKCode>(pair % Traits::KCode::kPairsPerWord));
        const float pair_scale = scale / weight;
        const __half2 q2 = __floats2half2_rn(float(row[c0]) * pair_scale, float(row[c1]) * pair_scale);
        b[kk][h] = as_u32(q2);
        const float2 back = __half22float2(q2);
        a_sum += back.x + back.y;
        sum += (back.x + back.y) * weight;
      }
    }
#pragma unroll
    for (int m = 1; m <= 2; m *= 2) {
      a_sum += __shfl_xor_sync(0xffffffffu, a_sum, m);
      sum += __shfl_xor_sync(0xffffffffu, sum, m);
    }
    // Row g's sums live in lanes 4g..4g+3; this thread's score rows are 2c and 2c + 1.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      q_sum[r] = __shfl_sync(0xffffffffu, sum, (2 * c + r) * 4);
      a_offset[r] = -1024.f * __shfl_sync(0xffffffffu, a_sum, (2 * c + r) * 4);
    }
  }
};

// ---- S^T = K Q^T --------------------------------------------------------------------------------

// 16-bit K: k-step kk's A fragment (keys g, g + 8 at columns 2c.. and 2c + 8..) is one ldmatrix.x4
// of the sub-tile's 16-byte chunks 2kk and 2kk + 1, whose lane addresses are the V reads' (matrix m
// = lane / 8: keys 8 (m % 2) + 0..7 of chunk 2kk + m / 2) less the V offset.
template <class Traits>
__device__ __forceinline__ void keys_as_rows_scores_native(const KeysAsRowsQ<Traits>& q, const char* stage,
                                                           const QuantLaneReads<Traits>& reads, float (&s)[4]) {
  static_assert(QuantLaneReads<Traits>::kVPairs == KeysAsRowsQ<Traits>::kSteps);
  float acc[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < KeysAsRowsQ<Traits>::kSteps; ++kk) {
    uint32_t a[4];
    cute::SM75_U32x4_LDSM_N::copy(*reinterpret_cast<const cute::uint128_t*>(stage + reads.v[kk] - Traits::kVOffset),
                                  a[0], a[1], a[2], a[3]);
    float(&d)[4] = acc[kk % 2];
    Traits::MmaOp::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], q.b[kk][0], q.b[kk][1], d[0], d[1], d[2], d[3]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] = acc[0][i] + acc[1][i];
}

template <class Traits>
__device__ __forceinline__ void keys_as_rows_scores_codes(const KeysAsRowsQ<Traits>& q, const char* stage,
                                                          const QuantLaneReads<Traits>& reads, float (&s)[4]) {
  using KCode = typename Traits::KCode;
  using Reads = QuantLaneReads<Traits>;
  uint32_t words[2][Reads::kKRunBytes / 4];  // keys g and g + 8
  read_key_code_words<Traits>(stage, reads, words);
  // Two accumulators (even and odd k-steps) halve the chain of dependent MMAs on the warp's path.
  float acc[2][4] = {};
  constexpr int kPairs = KCode::kPairsPerWord;
#pragma unroll
  for (int kk = 0; kk < KeysAsRowsQ<Traits>::kSteps; ++kk) {
    const int p0 = 2 * kk, p1 = 2 * kk + 1;
    const uint32_t a0 = k_pair<Traits::kKCode>(words[0][p0 / kPairs], p0 % kPairs);
    const uint32_t a1 = k_pair<Traits::kKCode>(words[1][p0 / kPairs], p0 % kPairs);
    const uint32_t a2 = k_pair<Traits::kKCode>(words[0][p1 / kPairs], p1 % kPairs);
    const uint32_t a3 = k_pair<Traits::kKCode>(words[1][p1 / kPairs], p1 % kPairs);
    float(&d)[4] = acc[kk % 2];
    Traits::MmaOp::fma(d[0], d[1], d[2], d[3], a0, a1, a2, a3, q.b[kk][0], q.b[kk][1], d[0], d[1], d[2], d[3]);
    if constexpr (kc_split_q<Traits>()) {
      Traits::MmaOp::fma(d[0], d[1], d[2], d[3], a0, a1, a2, a3, q.b_lo[kk][0], q.b_lo[kk][1], d[0], d[1], d[2], d[3]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] = acc[0][i] + acc[1][i];
}

// s[4]: (key g, row 2c), (key g, row 2c+1), (key g+8, row 2c), (key g+8, row 2c+1).
template <class Traits>
__device__ __forceinline__ void keys_as_rows_scores(const KeysAsRowsQ<Traits>& q, const char* stage,
                                                    const QuantLaneReads<Traits>& reads, float (&s)[4]) {
  if constexpr (Traits::kNative) {
    keys_as_rows_scores_native<Traits>(q, stage, reads, s);
  } else {
    keys_as_rows_scores_codes<Traits>(q, stage, reads, s);
  }
}

// INT K: scores over the dequantized keys (see fold_k_scales), keys g and g + 8.
template <class Traits>
__device__ __forceinline__ void keys_as_rows_fold_k_scales(const KeysAsRowsQ<Traits>& q, const char* k_scales,
                                                           int lane, float (&s)[4]) {
  const int g = lane / 4;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const float2 scale_min = key_scale_min(k_scales, g + 8 * n);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float bias = Traits::kKCode == CodeKind::kInt4
                             ? fmaf(scale_min.y, q.q_sum[r], scale_min.x * q.a_offset[r])
                             : (scale_min.y - 1024.f * scale_min.x) * q.q_sum[r];
      s[2 * n + r] = fmaf(scale_min.x, s[2 * n + r], bias);
    }
  }
}

// ---- softmax over keys along g -------------------------------------------------------------------

__device__ __forceinline__ float max_over_g(float x) {
#pragma unroll
  for (int m = 4; m <= 16; m *= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, m));
  return x;
}

__device__ __forceinline__ float sum_over_g(float x) {
#pragma unroll
  for (int m = 4; m <= 16; m *= 2) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

// OnlineSoftmax's recurrence for the thread's rows 2c, 2c + 1 (keys along g).
struct KeysAsRowsSoftmax {
  float row_max[2];
  float row_sum[2];  // this thread's keys only until reduce_sums()

  __device__ __forceinline__ void reset() {
    row_max[0] = row_max[1] = kNegInf;
    row_sum[0] = row_sum[1] = 0.f;
  }

  // Folds kSubtiles sub-tiles' scores at once (one row maximum over all of them): s[n] is sub-tile
  // n's s[4] of keys_as_rows_scores, replaced by its probabilities. One sub-tile keeps the sum order,
  // and so the bits, of a fold per sub-tile.
  template <int kSubtiles>
  __device__ __forceinline__ void fold(float (&s)[kSubtiles][4], float scale_log2, float (&rescale)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float local_max = row_max[r];
#pragma unroll
      for (int n = 0; n < kSubtiles; ++n) local_max = fmaxf(local_max, fmaxf(s[n][r], s[n][2 + r]));
      const float block_max = max_over_g(local_max);
      const float base = block_max == kNegInf ? 0.f : block_max * scale_log2;
      rescale[r] = fast_exp2(row_max[r] * scale_log2 - base);
      row_max[r] = block_max;
      float sum = row_sum[r] * rescale[r];
#pragma unroll
      for (int n = 0; n < kSubtiles; ++n) {
        s[n][r] = fast_exp2(s[n][r] * scale_log2 - base);
        s[n][2 + r] = fast_exp2(s[n][2 + r] * scale_log2 - base);
        sum = sum + s[n][r] + s[n][2 + r];
      }
      row_sum[r] = sum;
    }
  }

  __device__ __forceinline__ void reduce_sums() {
    row_sum[0] = sum_over_g(row_sum[0]);
    row_sum[1] = sum_over_g(row_sum[1]);
  }
};

// ---- O^T += V^T P^T -------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t transpose_8x8_b16(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// acc[m][4]: m-tile m = t * U + j covers head-dim rows (chunk 2t, unit g, code j) (g) and
// (chunk 2t + 1, unit g, code j) (g + 8), columns rows 2c, 2c + 1.
//
// With folded scales (the INT4 format), V codes enter the MMA as exact fp16 subnormals (code * w *
// 2^-24, int4_pair_subnormal: one mask per pair) and each key's scale moves into its probability
// instead: P'_k = P_k * scale_k (fp16). Then for every head-dim row
//   sum_k P_k (scale_k * code_k + min_k) = acc * 2^24 / w + mins,
// with mins = sum_k P_k * min_k per query row from one more MMA (A = each key's min). That removes
// the half2 scale * code + min per V pair from every sub-tile, and the subnormal codes the half2
// operation that took the magic number back out (the products and sums are those of the exact
// codes times a power of two, so the result is the same). (Feeding the biased codes, 1024 +
// w * code, and subtracting 1024 * sum P' at the end would also drop the code recovery, but the
// tensor cores' fp32 sums of the biased products lost a decimal digit at 64k keys (docs/TUNING.md, "Kernels").)
template <class Traits>
struct KeysAsRowsO {
  static constexpr int U = 16 / Traits::VCode::kBits;
  static constexpr int kTiles = Traits::kHeadDim / 16;
  // Folded for INT4 only, where it measured faster (docs/TUNING.md, "Kernels").
  static constexpr bool kFoldScales = Traits::kFormat == KvFormat::kInt4;
  float acc[kTiles][4];
  float mins[4];  // rows 2c, 2c + 1, 2c, 2c + 1 (folded scales only)

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int m = 0; m < kTiles; ++m) acc[m][i] = 0.f;
      mins[i] = 0.f;
    }
  }

  __device__ __forceinline__ void rescale(const float (&r)[2]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int m = 0; m < kTiles; ++m) acc[m][i] *= r[i % 2];
      if constexpr (kFoldScales) mins[i] *= r[i % 2];
    }
  }

  // Element i of m-tile m, dequantized (the sum over keys of P_k * x_k). M-tile m holds code j = m % U
  // of its units.
  __device__ __forceinline__ float value(int m, int i) const {
    if constexpr (kFoldScales) return fmaf(acc[m][i], int4_subnormal_unscale(m % U), mins[i]);
    return acc[m][i];
  }

  // Head-dim column of m-tile m's row g (half 0) or g + 8 (half 1).
  __device__ __forceinline__ static int column(int m, int half, int g) {
    const int t = m / U, j = m % U, chunk = 2 * t + half;
    return chunk * 8 * U + U * g + j;
  }
};

template <class Traits>
__device__ __forceinline__ void keys_as_rows_accumulate_pv(const float (&p)[4], const char* stage,
                                                           const QuantLaneReads<Traits>& reads, int lane,
                                                           KeysAsRowsO<Traits>& o) {
  constexpr int U = KeysAsRowsO<Traits>::U;
  const uint32_t b0 = transpose_8x8_b16(operand_pair<Traits>(p[0], p[1]));  // keys 0-7
  const uint32_t b1 = transpose_8x8_b16(operand_pair<Traits>(p[2], p[3]));  // keys 8-15
  constexpr bool kFold = KeysAsRowsO<Traits>::kFoldScales;
  uint32_t pv0 = b0, pv1 = b1;  // the B operand of the V^T products: P, or P' = P * scale (folded)
  uint32_t scale_lo = 0, min_lo = 0, scale_hi = 0, min_hi = 0;  // keys (2c, 2c+1) and (8+2c, 9+2c)
  if constexpr (Traits::kTokenScales) {
    const char* v_scales = stage + Traits::kVScaleOffset;
    key_pair_scales(v_scales, 2 * (lane % 4), scale_lo, min_lo);
    key_pair_scales(v_scales, 8 + 2 * (lane % 4), scale_hi, min_hi);
    if constexpr (kFold) {
      const int g = lane / 4;
      const float scale_g = key_scale_min(v_scales, g).x;
      const float scale_g8 = key_scale_min(v_scales, g + 8).x;
      pv0 = transpose_8x8_b16(as_u32(__floats2half2_rn(p[0] * scale_g, p[1] * scale_g)));
      pv1 = transpose_8x8_b16(as_u32(__floats2half2_rn(p[2] * scale_g8, p[3] * scale_g8)));
      Traits::MmaOp::fma(o.mins[0], o.mins[1], o.mins[2], o.mins[3], min_lo, min_lo, min_hi, min_hi, b0, b1,
                         o.mins[0], o.mins[1], o.mins[2], o.mins[3]);
    }
  }
  // A V pair as the MMA's A operand: subnormal codes when the scales are folded into P, else dequantized.
  auto a_pair = [&](uint32_t two_keys, int j, uint32_t scale, uint32_t min) {
    if constexpr (kFold) return int4_pair_subnormal(two_keys, j);
    else return v_pair<Traits::kVCode>(v_pair_codes<Traits::kVCode>(two_keys, j), scale, min);
  };
#pragma unroll
  for (int t = 0; t < QuantLaneReads<Traits>::kVPairs; ++t) {
    uint32_t r[4];
    cute::SM75_U16x8_LDSM_T::copy(*reinterpret_cast<const cute::uint128_t*>(stage + reads.v[t]), r[0], r[1], r[2],
                                  r[3]);
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const uint32_t a0 = a_pair(r[0], j, scale_lo, min_lo);
      const uint32_t a1 = a_pair(r[2], j, scale_lo, min_lo);
      const uint32_t a2 = a_pair(r[1], j, scale_hi, min_hi);
      const uint32_t a3 = a_pair(r[3], j, scale_hi, min_hi);
      float(&d)[4] = o.acc[t * U + j];
      Traits::MmaOp::fma(d[0], d[1], d[2], d[3], a0, a1, a2, a3, pv0, pv1, d[0], d[1], d[2], d[3]);
    }
  }
}

}  // namespace splitkv::detail
