// Split-KV decode over a quantized KV cache with the keys as the MMA's rows (quant_keys_as_rows.cuh):
// quant_decode_kernel's block, loader, ring, merge and epilogue, for blocks of at most 8 packed
// query rows.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/cp_async_wait.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/decode/decode_block.cuh"
#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/q_tile.cuh"
#include "kernels/decode_quant/quant_decode_traits.cuh"
#include "kernels/decode_quant/quant_keys_as_rows.cuh"
#include "kernels/decode_quant/quant_kv_loader.cuh"

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
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kWarpKeys;
  constexpr int kWarps = Traits::kWarps;
  constexpr int kStages = Traits::kStages;

  extern __shared__ __align__(128) char smem[];
  __shared__ int block_saw_bad_input;

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.m_tiles;
  const int m_tile = blockIdx.y % p.m_tiles;
  const int b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, c = lane % 4;
  if (tid == 0) block_saw_bad_input = 0;

  wait_for_prior_grids();
  allow_dependent_launch();

  const int row0 = m_tile * kM;
  const int rows_here = min(kM, p.rows_per_kv - row0);

  Element* smem_q = reinterpret_cast<Element*>(smem);
  char* smem_kv = smem + Traits::kQSmemBytes;
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), make_layout(Shape<Int<kM>, Int<D>>{}, LayoutRight{}));  // (M, D)
  load_q_tile<Traits>(p, sQ, b, kv_head, row0, rows_here, tid);
  cp_async_fence();

  const DecodeKeyRange keys = decode_key_range<Traits::kBlockKeys>(p, b, split, row0, rows_here);
  const int n_subtiles = keys.hi > keys.lo ? (keys.hi - keys.lo + kN - 1) / kN : 0;
  const int my_subtiles = n_subtiles > warp ? (n_subtiles - warp + kWarps - 1) / kWarps : 0;

  QuantKvLoader<Traits> kv(p, smem_kv + warp * kStages * Traits::kStageBytes, b, kv_head, keys.lo, keys.hi, warp,
                           lane);
  CUTE_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < my_subtiles) kv.issue_next();
    cp_async_fence();
  }

  cp_async_wait<kStages - 1>();
  __syncthreads();
  KeysAsRowsQ<Traits> q;
  q.load(smem_q, lane);
  float k_scale = 1.f, v_scale = 1.f;
  if constexpr (Traits::kKCode == CodeKind::kFp8) k_scale = static_cast<const float*>(p.k_scales)[kv_head];
  if constexpr (Traits::kVCode == CodeKind::kFp8) v_scale = static_cast<const float*>(p.v_scales)[kv_head];
  const float scale_log2 = p.scale_log2 * q.unshift * k_scale;

  KeysAsRowsO<Traits> o;
  CUTE_UNROLL
  for (int m = 0; m < KeysAsRowsO<Traits>::kTiles; ++m) o.acc[m][0] = o.acc[m][1] = o.acc[m][2] = o.acc[m][3] = 0.f;
  KeysAsRowsSoftmax softmax;
  softmax.reset();
  int row_end[2];  // rows 2c, 2c + 1: the end of the keys each sees
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = min(row0 + 2 * c + r, p.rows_per_kv - 1);
    row_end[r] = min(keys.hi, visible_shard_key_end(p.causal, p.q_len, keys.len, keys.after, row / p.group));
  }
  const QuantLaneReads<Traits> reads(lane);

  // ---- Main loop over this warp's sub-tiles ----------------------------------------------------------
  int read_stage = 0;  // n % kStages
  for (int n = 0; n < my_subtiles; ++n) {
    cp_async_wait<kStages - 2>();
    __syncwarp();  // sub-tile n visible to all lanes; all lanes are done with sub-tile n - 1
    if (n + kStages - 1 < my_subtiles) kv.issue_next();
    cp_async_fence();
    const char* stage = kv.stage(read_stage);
    read_stage = read_stage == kStages - 1 ? 0 : read_stage + 1;

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
    if (!__all_sync(0xffffffffu, rescale[0] == 1.f && rescale[1] == 1.f)) {
      CUTE_UNROLL
      for (int m = 0; m < KeysAsRowsO<Traits>::kTiles; ++m) {
        CUTE_UNROLL
        for (int i = 0; i < 4; ++i) o.acc[m][i] *= rescale[i % 2];
      }
    }
    keys_as_rows_accumulate_pv<Traits>(s, stage, reads, lane, o);
  }
  cp_async_wait<0>();
  softmax.reduce_sums();

  // ---- Merge the warps' states (fixed order: deterministic), then write ------------------------------
  __syncthreads();  // every warp is done with its ring: the merge buffers overlay it
  using MergeSmem = WarpMergeSmem<kWarps, kM, D>;
  const MergeSmem merge(smem_kv);
  float* cluster_o = reinterpret_cast<float*>(smem_kv + MergeSmem::kBytes);  // [M][D]
  float* cluster_lse = cluster_o + kM * D;                                   // [M]
  float* sO = merge.o + warp * kM * D;                                       // [M][D] fp32
  CUTE_UNROLL
  for (int m = 0; m < KeysAsRowsO<Traits>::kTiles; ++m) {
    CUTE_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int col = KeysAsRowsO<Traits>::column(m, half, g);
      sO[(2 * c) * D + col] = o.acc[m][2 * half];
      sO[(2 * c + 1) * D + col] = o.acc[m][2 * half + 1];
    }
  }
  if (g == 0) {
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      merge.max[warp * kM + 2 * c + r] = softmax.row_max[r];
      merge.sum[warp * kM + 2 * c + r] = softmax.row_sum[r];
    }
  }
  if (keys.bad_input || kv.bad_input) block_saw_bad_input = 1;
  __syncthreads();
  finish_decode_block<Element, kWarps, kM, D, Traits::kThreads>(p, merge, cluster_o, cluster_lse,
                                                                block_saw_bad_input != 0, b, kv_head, split, row0,
                                                                rows_here, scale_log2, v_scale);
}

}  // namespace splitkv::detail
