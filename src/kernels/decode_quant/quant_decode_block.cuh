// What both quantized-cache decode kernels do around their key loops (quant_decode_kernel.cuh, 16
// packed rows on the MMA's M side; quant_decode_keys_as_rows_kernel.cuh, at most 8 on its N side):
// the block's place in the grid, its Q tile and first ring stages in flight, FP8's per-head
// scales, and after the loop the warp merge and the epilogue (decode/decode_block.cuh).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/pdl.cuh"
#include "kernels/decode/decode_block.cuh"
#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/l2_prefetch.cuh"
#include "kernels/decode/q_tile.cuh"
#include "kernels/decode_quant/quant_kv_loader.cuh"

namespace splitkv::detail {

// The block's (KV split, KV head, query tile, sequence): decode_mma's grid.
struct QuantBlockCoords {
  int split, kv_head, m_tile, b;
  int row0, rows_here;  // the tile's packed query rows [row0, row0 + rows_here)

  template <int kM>
  __device__ __forceinline__ static QuantBlockCoords of_this_block(const DecodeParams& p) {
    QuantBlockCoords at;
    at.split = blockIdx.x;
    at.kv_head = p.m_tiles.div(blockIdx.y);
    at.m_tile = p.m_tiles.mod(blockIdx.y);
    at.b = blockIdx.z;
    at.row0 = at.m_tile * kM;
    at.rows_here = min(kM, p.rows_per_kv - at.row0);
    return at;
  }
};

// FP8's per-KV-head scales (none for the integer formats, whose scales are per token) travel with
// the Q tile: thread 0 copies K's and thread 1 V's into this block's two floats in the Q tile's
// cp.async group, so the scales are in shared memory when the Q tile is, instead of a global load
// after it on a short row's way to its first scores. The offset is 32-bit: validation keeps
// (Hkv - 1) * head_stride within int32 (check_kv_scale_tensor).
template <class Traits>
__device__ __forceinline__ float* fp8_head_scales_smem() {
  __shared__ float scales[2];  // K's, V's
  return scales;
}

template <class Traits>
__device__ __forceinline__ void stage_fp8_head_scales(const DecodeParams& p, int kv_head, int tid) {
  const KvScaleView* side = nullptr;
  if constexpr (Traits::kKCode == CodeKind::kFp8) {
    if (tid == 0) side = &p.kv.k_scales;
  }
  if constexpr (Traits::kVCode == CodeKind::kFp8) {
    if (tid == 1) side = &p.kv.v_scales;
  }
  if constexpr (Traits::kKCode == CodeKind::kFp8 || Traits::kVCode == CodeKind::kFp8) {
    if (side != nullptr) {
      const float* src = static_cast<const float*>(side->data) + kv_head * static_cast<int>(side->head_stride);
      cute::SM80_CP_ASYNC_CACHEALWAYS<float>::copy(*src, fp8_head_scales_smem<Traits>()[tid]);
    }
  }
}

// The block starts: it clears its bad-input flag, asks L2 for its Q rows and first keys
// (l2_prefetch.cuh), waits for the prior grid (PDL), and the Q tile (row-major (M, D) at the start
// of shared memory) goes out as a cp.async group. Returns the block's key range.
template <class Traits, bool kVariants = false>
__device__ __forceinline__ DecodeKeyRange start_quant_block(const DecodeParams& p, const QuantBlockCoords& at,
                                                            char* smem, int tid, int& block_saw_bad_input) {
  using namespace cute;
  if (tid == 0) block_saw_bad_input = 0;
  prefetch_block_start_to_l2<Traits, kVariants>(p, at.b, at.kv_head, at.split, at.row0, at.rows_here, tid);
  wait_for_prior_grids();
  allow_dependents_at_start(p);

  using Element = typename Traits::Element;
  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)),
                          make_layout(Shape<Int<Traits::kBlockM>, Int<Traits::kHeadDim>>{}, LayoutRight{}));  // (M, D)
  load_q_tile<Traits>(p, sQ, at.b, at.kv_head, at.row0, at.rows_here, tid);
  stage_fp8_head_scales<Traits>(p, at.kv_head, tid);
  cp_async_fence();
  return decode_key_range<Traits::kBlockKeys, kVariants, Traits::kChannelKeys>(p, at.b, at.split, at.row0, at.rows_here);
}

// After start_quant_block, in a block that reads keys: each warp's first kStages - 1 sub-tiles go
// out as cp.async groups (after the Q group). Returns, once every thread sees the Q tile, the
// warp's loader; my_subtiles: the warp's share of the block's 16-key sub-tiles.
template <class Traits>
__device__ __forceinline__ QuantKvLoader<Traits> start_quant_ring(const DecodeParams& p, const QuantBlockCoords& at,
                                                                  char* smem, int tid, const DecodeKeyRange& keys,
                                                                  int& my_subtiles) {
  using namespace cute;
  constexpr int kN = Traits::kWarpKeys;
  constexpr int kWarps = Traits::kWarps;
  const int warp = tid / 32, lane = tid % 32;
  const int n_subtiles = subtile_count<kN>(keys);
  if constexpr (Traits::kRunSubtiles == 1) {
    my_subtiles = n_subtiles > warp ? (n_subtiles - warp + kWarps - 1) / kWarps : 0;
  } else {  // runs of kRunSubtiles (QuantKvLoader): only the range's last run may be shorter
    constexpr int kRun = Traits::kRunSubtiles;
    const int runs = (n_subtiles + kRun - 1) / kRun;
    const int my_runs = runs > warp ? (runs - warp + kWarps - 1) / kWarps : 0;
    const int last_run = warp + (my_runs - 1) * kWarps;
    my_subtiles = my_runs > 0 ? (my_runs - 1) * kRun + min(kRun, n_subtiles - last_run * kRun) : 0;
  }

  char* smem_kv = smem + Traits::kQSmemBytes;
  // Keys per channel: keys before groups_end are read from codes and group scales, the rest (the
  // sequence's newest, incomplete group) from its 16-bit tail.
  const int groups_end = keys.len / Traits::kKeyGroup * Traits::kKeyGroup;
  QuantKvLoader<Traits> kv(p, smem_kv + warp * Traits::kStages * Traits::kStageBytes, at.b, at.kv_head, keys.lo,
                           keys.hi, warp, lane, groups_end);
  CUTE_UNROLL
  for (int s = 0; s < Traits::kStages - 1; ++s) {
    if (s < my_subtiles) kv.issue_next();
    cp_async_fence();
  }
  cp_async_wait<Traits::kStages - 1>();  // the Q group
  __syncthreads();
  return kv;
}

// FP8's per-KV-head scales (1 for the integer formats), once start_quant_ring has seen the Q
// tile's group land (stage_fp8_head_scales).
template <class Traits>
__device__ __forceinline__ void fp8_head_scales(float& k_scale, float& v_scale) {
  k_scale = v_scale = 1.f;
  if constexpr (Traits::kKCode == CodeKind::kFp8) k_scale = fp8_head_scales_smem<Traits>()[0];
  if constexpr (Traits::kVCode == CodeKind::kFp8) v_scale = fp8_head_scales_smem<Traits>()[1];
}

// After the key loop: every warp stores its (O, row max, row sum) into the merge buffers, which
// overlay the rings (store_state(merge, warp)), the block notes bad input, and the warps' states
// are merged in fixed order (deterministic) and written (finish_decode_block; kOutOfLine: as a
// call, finish_decode_block_out_of_line; kSinks: a variants instance, which folds p.sinks).
template <class Traits, bool kOutOfLine = false, bool kSinks = false, class StoreState>
__device__ __forceinline__ void finish_quant_block(const DecodeParams& p, const QuantBlockCoords& at, char* smem,
                                                   int tid, bool saw_bad_input, int& block_saw_bad_input,
                                                   float scale_log2, float v_scale, StoreState store_state) {
  constexpr int kM = Traits::kBlockM;
  constexpr int D = Traits::kHeadDim;
  constexpr int kWarps = Traits::kWarps;
  char* smem_kv = smem + Traits::kQSmemBytes;
  __syncthreads();  // every warp is done with its ring: the merge buffers overlay it
  using MergeSmem = WarpMergeSmem<kWarps, kM, D>;
  const MergeSmem merge(smem_kv);
  char* cluster_inbox = smem_kv + MergeSmem::kBytes;
  static_assert(Traits::kQSmemBytes + MergeSmem::kBytes + tiles::cluster_inbox_bytes(kM, D) <= Traits::kSmemBytes);
  hand_inbox_to_cluster<kM, D, Traits::kThreads>(p, cluster_inbox);
  store_state(merge, tid / 32);
  if (saw_bad_input) block_saw_bad_input = 1;
  __syncthreads();
  constexpr int kStagingBytes = Traits::kSmemBytes - Traits::kQSmemBytes;
  using Element = typename Traits::Element;
  if constexpr (kOutOfLine) {
    finish_decode_block_out_of_line<Element, kWarps, kM, D, Traits::kThreads, kStagingBytes, kSinks>(
        p, merge, cluster_inbox, smem_kv, block_saw_bad_input != 0, at.b, at.kv_head, at.split, at.row0, at.rows_here,
        scale_log2, v_scale);
  } else {
    finish_decode_block<Element, kWarps, kM, D, Traits::kThreads, kStagingBytes, kSinks>(
        p, merge, cluster_inbox, smem_kv, block_saw_bad_input != 0, at.b, at.kv_head, at.split, at.row0, at.rows_here,
        scale_log2, v_scale);
  }
}

}  // namespace splitkv::detail
