// The keys-as-rows kernel's scores over keys quantized per channel (*_kc, docs/KV_FORMATS.md, "Keys
// quantized per channel"). A complete 64-key group stores each channel c as fp16 (scale_c, min_c)
// and codes, so a query row's score of key t is
//   sum_c q_c (scale_c code_tc + min_c) = sum_c (q_c scale_c) code_tc + sum_c q_c min_c.
// The per-channel scale moves into Q once per group (a warp meets each group once: its sub-tiles
// come in runs of one group, QuantKvLoader), so the key loop multiplies raw codes exactly as for
// per-token scales (quant_keys_as_rows.cuh), and the minima become one dot product per row and
// group. In the units of the shifted Q (q~ = q 2^shift, as the per-token path):
//   a_c = q~_c scale_c 2^-e / w_c (e: max_c scale_c < 2^e, and max |q~| in [2^13, 2^14)
//         (kc_q_shift), put every a_c under 2^14 on fp16's top exponents, so a channel whose scale
//         is small next to the group's outlier stays clear of fp16's subnormals; w_c: the code
//         weight of the pair, 1 or 16), rounded to fp16, or with fp16 Q (kc_split_q) held as two
//         fp16 halves a_c = hi_c + lo_c: one fp16 rounding moves a score by 2^-12 of each channel's
//         scale_c code_tc term, up to twice a plain fp16 kernel's error (lo_c leaves 2^-23),
//   raw = sum_c a_c (1024 + w_c code_tc) (the MMA over the biased codes; two with halves),
//   score = 2^e raw + (sum_c q~_c min_c - 1024 2^e sum_c a_c)   (one fma per score).
// The keys of the sequence's newest, incomplete group live in its 16-bit tail ring: the run that
// holds them (a warp's last) multiplies them as stored, in the Q/O dtype, with Q as stored, read
// straight from global memory (at most 63 keys per sequence).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include <cute/arch/mma_sm80.hpp>
#include <cutlass/numeric_types.h>

#include "kernels/decode_quant/kv_codes.cuh"
#include "kernels/decode_quant/quant_keys_as_rows.cuh"

namespace splitkv::detail {

// Per group: scores of the group's keys are fmaf(unscale, raw, bias[r]) for rows 2c + r.
struct KcGroupFold {
  float unscale;
  float bias[2];
};

// Q's power-of-two shift for the whole tile: sets q.unshift (2^-shift). Unlike the per-token path
// (q_tile_shift, which shifts only a tile outside fp16's comfortable range), max |q~| always lands
// in [2^13, 2^14): the folded operands a_c then use fp16's top exponents (build_kc_group_q).
template <class Traits, class Element>
__device__ __forceinline__ void kc_q_shift(KeysAsRowsQ<Traits>& q, const Element* sQ, int lane) {
  const float max_abs = q_tile_max_abs<kKeysAsRowsQueries * Traits::kHeadDim>(sQ, lane);
  int shift = 0;
  if (max_abs > 0.f && max_abs <= 3.0e38f) {
    int exponent;
    frexpf(max_abs, &exponent);  // max_abs < 2^exponent
    shift = 14 - exponent;
  }
  q.unshift = ldexpf(1.f, -shift);
}

// Rebuilds q.b for one group from the tile's Q (sQ, row-major [8][D]) and the group's (scale[D],
// min[D]) fp16 in shared memory, and returns the group's fold. Thread (g, c) holds row g's pairs
// over its run of D/4 columns from col0 = c D/4 (k_pair_column): 8 columns of the run hold pairs
// 4v .. 4v + 3 for both code widths, so the run is read 8 columns (16 bytes of each of Q, scale
// and min) at a time.
template <class Traits, class Element>
__device__ __forceinline__ KcGroupFold build_kc_group_q(KeysAsRowsQ<Traits>& q, float q_scale, const Element* sQ,
                                                        const uint16_t* group, int lane) {
  constexpr int D = Traits::kHeadDim;
  constexpr int kChunks = D / 32;  // of 8 columns in a thread's run
  constexpr CodeKind kK = Traits::kKCode;
  static_assert(kK == CodeKind::kInt8 || kK == CodeKind::kInt4);
  const int g = lane / 4, c = lane % 4;
  const int col0 = c * (D / 4);
  const __half* scales = reinterpret_cast<const __half*>(group);
  const __half* mins = scales + D;

  // e: the largest scale of the group (over all D channels: the run's, then the row's four lanes).
  // With max |q~| in [2^13, 2^14) (kc_q_shift), every a_c is under 2^14.
  float max_scale = 0.f;
  CUTE_UNROLL
  for (int v = 0; v < kChunks; ++v) {
    const uint4 s8 = *reinterpret_cast<const uint4*>(scales + col0 + 8 * v);
    const __half2* s2 = reinterpret_cast<const __half2*>(&s8);
    CUTE_UNROLL
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(__habs2(s2[i]));
      max_scale = fmaxf(max_scale, fmaxf(f.x, f.y));
    }
  }
  max_scale = fmaxf(max_scale, __shfl_xor_sync(0xffffffffu, max_scale, 1));
  max_scale = fmaxf(max_scale, __shfl_xor_sync(0xffffffffu, max_scale, 2));
  int e = 0;
  if (max_scale > 0.f && max_scale <= 65504.f) frexpf(max_scale, &e);  // max_scale < 2^e
  const float a_scale = ldexpf(q_scale, -e);                            // q 2^shift 2^-e

  float a_sum = 0.f, min_dot = 0.f;  // row g over this thread's run
  CUTE_UNROLL
  for (int v = 0; v < kChunks; ++v) {
    const uint4 q8 = *reinterpret_cast<const uint4*>(sQ + g * D + col0 + 8 * v);
    const uint4 s8 = *reinterpret_cast<const uint4*>(scales + col0 + 8 * v);
    const uint4 m8 = *reinterpret_cast<const uint4*>(mins + col0 + 8 * v);
    const Element* qv = reinterpret_cast<const Element*>(&q8);
    const __half* sv = reinterpret_cast<const __half*>(&s8);
    const __half* mv = reinterpret_cast<const __half*>(&m8);
    CUTE_UNROLL
    for (int i = 0; i < 8; ++i) min_dot = fmaf(float(qv[i]) * q_scale, __half2float(mv[i]), min_dot);
    CUTE_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int pair = 4 * v + j;  // (pair = 2 kk + h)
      const int c0 = k_pair_column<kK>(pair, 0) - 8 * v, c1 = k_pair_column<kK>(pair, 1) - 8 * v;
      const float weight = float(k_pair_weight<kK>(pair % Traits::KCode::kPairsPerWord));
      const float pair_scale = a_scale / weight;  // a power of two
      const float ax = float(qv[c0]) * __half2float(sv[c0]) * pair_scale;
      const float ay = float(qv[c1]) * __half2float(sv[c1]) * pair_scale;
      const __half2 hi = __floats2half2_rn(ax, ay);
      const float2 hi_back = __half22float2(hi);
      q.b[pair / 2][pair % 2] = as_u32(hi);
      a_sum += hi_back.x + hi_back.y;
      if constexpr (kc_split_q<Traits>()) {
        const __half2 lo = __floats2half2_rn(ax - hi_back.x, ay - hi_back.y);
        const float2 lo_back = __half22float2(lo);
        q.b_lo[pair / 2][pair % 2] = as_u32(lo);
        a_sum += lo_back.x + lo_back.y;
      }
    }
  }
  CUTE_UNROLL
  for (int m = 1; m <= 2; m *= 2) {
    a_sum += __shfl_xor_sync(0xffffffffu, a_sum, m);
    min_dot += __shfl_xor_sync(0xffffffffu, min_dot, m);
  }
  KcGroupFold fold;
  fold.unscale = ldexpf(1.f, e);
  // Row g's sums live in lanes 4g .. 4g + 3; this thread's score rows are 2c and 2c + 1.
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float row_a = __shfl_sync(0xffffffffu, a_sum, (2 * c + r) * 4);
    const float row_min = __shfl_sync(0xffffffffu, min_dot, (2 * c + r) * 4);
    fold.bias[r] = fmaf(-1024.f * fold.unscale, row_a, row_min);
  }
  return fold;
}

// s[4] (keys g, g + 8 of rows 2c, 2c + 1) from raw sums over the biased codes to scores.
__device__ __forceinline__ void apply_kc_group_fold(const KcGroupFold& fold, float (&s)[4]) {
  CUTE_UNROLL
  for (int i = 0; i < 4; ++i) s[i] = fmaf(fold.unscale, s[i], fold.bias[i % 2]);
}

// Scores of keys [t0, t0 + 16) from the sequence's tail ring (`tail`: its KV head's rows, row p %
// 128 holds position p, row_stride elements apart, D contiguous), keys at or past `end` as 0 (the
// caller masks them), in the units of the shifted Q (times q_scale). K is the A operand (thread (g,
// c): keys g and g + 8 at columns 16kk + 2c.. and 16kk + 8 + 2c..), Q the B operand as stored.
template <class Traits, class Element>
__device__ __forceinline__ void kc_tail_scores(const Element* sQ, const Element* tail, int64_t row_stride, int t0,
                                               int end, float q_scale, int lane, float (&s)[4]) {
  constexpr int D = Traits::kHeadDim;
  using TailMma = std::conditional_t<std::is_same_v<Element, cutlass::bfloat16_t>,
                                     cute::SM80_16x8x16_F32BF16BF16F32_TN, cute::SM80_16x8x16_F32F16F16F32_TN>;
  const int g = lane / 4, c = lane % 4;
  const bool has[2] = {t0 + g < end, t0 + g + 8 < end};
  const Element* key[2] = {tail + int64_t((t0 + g) % kKeyTailRows) * row_stride,
                           tail + int64_t((t0 + g + 8) % kKeyTailRows) * row_stride};
  const Element* q_row = sQ + g * D;
  float acc[4] = {};  // one chain: the tail is at most 4 sub-tiles of a sequence, registers are not
  CUTE_UNROLL
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    CUTE_UNROLL
    for (int i = 0; i < 4; ++i) {  // a0: key g, a1: key g + 8 (columns 2c..); a2, a3: columns 2c + 8..
      const int n = i % 2, col = 16 * kk + 8 * (i / 2) + 2 * c;
      a[i] = has[n] ? *reinterpret_cast<const uint32_t*>(key[n] + col) : 0u;
    }
    const uint32_t b0 = *reinterpret_cast<const uint32_t*>(q_row + 16 * kk + 2 * c);
    const uint32_t b1 = *reinterpret_cast<const uint32_t*>(q_row + 16 * kk + 8 + 2 * c);
    TailMma::fma(acc[0], acc[1], acc[2], acc[3], a[0], a[1], a[2], a[3], b0, b1, acc[0], acc[1], acc[2], acc[3]);
  }
  CUTE_UNROLL
  for (int i = 0; i < 4; ++i) s[i] = acc[i] * q_scale;
}

// The block's view of its sequence's tail ring: its KV head's rows, or bad (a tail slot outside the
// ring: the sequence reads NaN).
template <class Element>
struct KcTail {
  const Element* rows = nullptr;
  int64_t row_stride = 0;
  bool bad = false;
};

template <class Element>
__device__ __forceinline__ KcTail<Element> kc_tail_of(const DecodeParams& p, int b, int kv_head) {
  KcTail<Element> t;
  const int64_t slot = tail_slot_of(p.kv.k_tail, b);
  t.bad = !tail_slot_in_ring(p.kv.k_tail, slot);
  t.rows = static_cast<const Element*>(p.kv.k_tail.rows) + (t.bad ? 0 : slot) * p.kv.k_tail.slot_stride +
           kv_head * p.kv.k_tail.head_stride;
  t.row_stride = p.kv.k_tail.row_stride;
  return t;
}

}  // namespace splitkv::detail
