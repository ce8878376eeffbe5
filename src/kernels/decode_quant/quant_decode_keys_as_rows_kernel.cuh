// Split-KV decode over a quantized KV cache with the keys as the MMA's rows (quant_keys_as_rows.cuh):
// quant_decode_kernel's block, loader, ring, merge and epilogue (quant_decode_block.cuh), for
// blocks of at most 8 packed query rows.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/decode_quant/quant_decode_block.cuh"
#include "kernels/decode_quant/quant_decode_traits.cuh"
#include "kernels/decode_quant/quant_keys_as_rows.cuh"

namespace splitkv::detail {

// The quantized-cache traits with 8 packed rows per block.
template <class Base>
struct KeysAsRowsTraits : Base {
  static constexpr int kBlockM = kKeysAsRowsQueries;
};

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    quant_decode_keys_as_rows_kernel(const __grid_constant__ DecodeParams p) {
  using namespace cute;
  constexpr int D = Traits::kHeadDim;
  constexpr int kN = Traits::kWarpKeys;

  extern __shared__ __align__(128) char smem[];
  __shared__ int block_saw_bad_input;

  const QuantBlockCoords at = QuantBlockCoords::of_this_block<Traits::kBlockM>(p);
  const int tid = threadIdx.x, lane = tid % 32;
  const int g = lane / 4, c = lane % 4;
  DecodeKeyRange keys;
  int my_subtiles;
  QuantKvLoader<Traits> kv = start_quant_block<Traits>(p, at, smem, tid, block_saw_bad_input, keys, my_subtiles);

  KeysAsRowsQ<Traits> q;
  q.load(reinterpret_cast<const typename Traits::Element*>(smem), lane);
  float k_scale, v_scale;
  fp8_head_scales<Traits>(p, at.kv_head, k_scale, v_scale);
  const float scale_log2 = p.scale_log2 * q.unshift * k_scale;

  KeysAsRowsO<Traits> o;
  o.clear();
  KeysAsRowsSoftmax softmax;
  softmax.reset();
  int row_end[2];  // rows 2c, 2c + 1: the end of the keys each sees
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = min(at.row0 + 2 * c + r, p.rows_per_kv - 1);
    row_end[r] = min(keys.hi, visible_shard_key_end(p.causal, p.q_len, keys.len, keys.after, p.group.div(row)));
  }
  const QuantLaneReads<Traits> reads(lane);

  // ---- Main loop over this warp's sub-tiles ----------------------------------------------------------
  for (int n = 0; n < my_subtiles; ++n) {
    const char* stage = kv.next_to_read(n, my_subtiles);
    float s[4];
    keys_as_rows_scores<Traits>(q, stage, reads, s);
    if constexpr (Traits::kTokenScales) keys_as_rows_fold_k_scales<Traits>(q, stage + Traits::kKScaleOffset, lane, s);
    const int t0 = kv.subtile_start(n);
    if (t0 + kN > min(row_end[0], row_end[1])) {
      CUTE_UNROLL
      for (int i = 0; i < 4; ++i) {
        if (t0 + g + 8 * (i / 2) >= row_end[i % 2]) s[i] = kNegInf;
      }
    }
    float rescale[2];
    softmax.fold(s, scale_log2, rescale);
    if (!__all_sync(0xffffffffu, rescale[0] == 1.f && rescale[1] == 1.f)) o.rescale(rescale);
    keys_as_rows_accumulate_pv<Traits>(s, stage, reads, lane, o);
  }
  cp_async_wait<0>();
  softmax.reduce_sums();

  // O^T's columns are the query rows: each thread holds rows 2c, 2c + 1 of its head-dim columns.
  finish_quant_block<Traits>(p, at, smem, tid, keys.bad_input || kv.bad_input, block_saw_bad_input, scale_log2,
                             v_scale, [&](const auto& merge, int warp) {
                               float* sO = merge.o + warp * Traits::kBlockM * D;  // [M][D] fp32
                               CUTE_UNROLL
                               for (int m = 0; m < KeysAsRowsO<Traits>::kTiles; ++m) {
                                 CUTE_UNROLL
                                 for (int half = 0; half < 2; ++half) {
                                   const int col = KeysAsRowsO<Traits>::column(m, half, g);
                                   sO[(2 * c) * D + col] = o.value(m, 2 * half);
                                   sO[(2 * c + 1) * D + col] = o.value(m, 2 * half + 1);
                                 }
                               }
                               if (g == 0) {
                                 CUTE_UNROLL
                                 for (int r = 0; r < 2; ++r) {
                                   merge.max[warp * Traits::kBlockM + 2 * c + r] = softmax.row_max[r];
                                   merge.sum[warp * Traits::kBlockM + 2 * c + r] = softmax.row_sum[r];
                                 }
                               }
                             });
}

}  // namespace splitkv::detail
