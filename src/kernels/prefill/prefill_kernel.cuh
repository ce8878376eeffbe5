// Prefill forward, FlashAttention-2 class: blocks over (query block, query head, sequence x KV
// split), warps over query rows, online softmax with fp32 statistics.
//
// Per step of block_n keys: K arrives as kKSubTiles cp.async groups (one per K sub-tile) and the
// scores of a sub-tile are computed as soon as it lands; V arrives as kVSlices column slices while
// the scores are computed, and P*V runs slice by slice. K of the next step loads during P*V. With
// one sub-tile and one slice this is FlashAttention-2's schedule; the independent 16-key K
// sub-tiles and 64-column V slices of the prefill_mma_k16v64 family are the same code.
//
// The same body runs the two-pass strategy: kStats computes only each row's max and sum of exp
// over all keys; kFromStats recomputes the scores and applies the final softmax directly.
//
// kVariants: the one-pass kernel's variants instance (PrefillParams' softcap and sliding window,
// docs/VARIANTS.md): scores capped before the masks, keys outside every row's window never read.
// kCapped: its version for a softcap (the launcher picks it where p.softcap > 0; the other version
// holds no softcap code).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/cp_async_wait.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/score_softcap.cuh"
#include "kernels/prefill/prefill_common.cuh"
#include "kernels/prefill/prefill_traits.cuh"

namespace splitkv::detail {

template <class Traits, PrefillPass kPass, bool kVariants = false, bool kCapped = false>
__global__ void __launch_bounds__(Traits::kThreads) prefill_kernel(const __grid_constant__ PrefillParams p) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kBlockN;
  constexpr int kKSubKeys = Traits::kKSubKeys;
  constexpr int kKSubTiles = Traits::kKSubTiles;
  constexpr int kVSliceCols = Traits::kVSliceCols;
  constexpr int kVSlices = Traits::kVSlices;
  constexpr bool kUsesV = kPass != PrefillPass::kStats;
  static_assert(kKSubTiles + kVSlices <= 8, "cp_async_wait_pending handles up to 7 pending groups");
  static_assert(!kVariants || kPass == PrefillPass::kFused, "the variants run in the one-pass kernel");
  static_assert(!kCapped || kVariants, "a softcap is a variant");

  extern __shared__ __align__(128) char smem[];
  wait_for_prior_grids();
  allow_dependent_launch();
  PrefillBlock<Element> blk;
  if (!blk.template init<kVariants>(p, kM, kN)) return;  // no such rows in this sequence
  const int tid = threadIdx.x;
  const PrefillSequence& seq = blk.seq;
  const KeyRange& keys = blk.keys;
  const int b = blk.b, hq = blk.hq, split = blk.split, row0 = blk.row0;

  Tensor sQ = Traits::smem_q(smem);    // (M, D)
  Tensor sK = Traits::smem_k(smem);    // (N, D)
  Tensor sV = Traits::smem_v(smem);    // (N, D)
  Tensor sVt = Traits::smem_vt(smem);  // (D, N)

  // ---- Global tiles ------------------------------------------------------------------------------
  const Element* k_base = blk.k_base;
  const Element* v_base = blk.v_base;
  Tensor gQ = make_tensor(make_gmem_ptr(blk.q_base), Shape<Int<kM>, Int<D>>{}, make_stride(p.q_token_stride, _1{}));

  typename Traits::GmemCopyRows copy_rows;
  auto thr_copy_rows = copy_rows.get_thread_slice(tid);
  typename Traits::GmemCopyVSlice copy_v;
  auto thr_copy_v = copy_v.get_thread_slice(tid);

  const bool paged = p.kv.block_table != nullptr;  // a paged decode cache: rows gathered page by page
  auto issue_k = [&](int n0) {  // one group per K sub-tile
    CUTE_UNROLL
    for (int j = 0; j < kKSubTiles; ++j) {
      const int t0 = n0 + j * kKSubKeys;
      auto sK_j = local_tile(sK, Shape<Int<kKSubKeys>, Int<D>>{}, make_coord(j, 0));
      if (paged) {
        gather_rows_zfill(copy_rows, thr_copy_rows, sK_j, seq.k_len - t0, [&](int r) {
          return blk.paged_row(p, k_base, p.kv.k.block_stride, p.kv.k.token_stride, t0 + r);
        }, k_base);
      } else {
        Tensor gK = make_tensor(make_gmem_ptr(k_base + int64_t(t0) * p.kv.k.token_stride), Shape<Int<kKSubKeys>, Int<D>>{},
                                make_stride(p.kv.k.token_stride, _1{}));
        copy_rows_zfill(copy_rows, thr_copy_rows, gK, sK_j, seq.k_len - t0);
      }
      cp_async_fence();
    }
  };
  auto issue_v = [&](int n0) {  // one group per V column slice
    CUTE_UNROLL
    for (int v = 0; v < kVSlices; ++v) {
      auto sV_v = local_tile(sV, Shape<Int<kN>, Int<kVSliceCols>>{}, make_coord(0, v));
      if (paged) {
        gather_rows_zfill(copy_v, thr_copy_v, sV_v, seq.k_len - n0, [&](int r) {
          return blk.paged_row(p, v_base, p.kv.v.block_stride, p.kv.v.token_stride, n0 + r) + v * kVSliceCols;
        }, v_base);
      } else {
        Tensor gV = make_tensor(make_gmem_ptr(v_base + int64_t(n0) * p.kv.v.token_stride + v * kVSliceCols),
                                Shape<Int<kN>, Int<kVSliceCols>>{}, make_stride(p.kv.v.token_stride, _1{}));
        copy_rows_zfill(copy_v, thr_copy_v, gV, sV_v, seq.k_len - n0);
      }
      cp_async_fence();
    }
  };
  auto fence_empty = [](int groups) {  // keeps the group count uniform on the last step
    for (int g = 0; g < groups; ++g) cp_async_fence();
  };

  copy_rows_zfill(copy_rows, thr_copy_rows, gQ, sQ, blk.rows_here);
  cp_async_fence();
  if (blk.n_blocks > 0) {
    issue_k(keys.lo);
  } else {
    fence_empty(kKSubTiles);
  }

  // ---- MMA partitions -------------------------------------------------------------------------------
  typename Traits::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(tid);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);  // (MMA, MMA_M, MMA_K)
  auto smem_copy_q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_q = smem_copy_q.get_thread_slice(tid);
  Tensor tSsQ = smem_thr_copy_q.partition_S(sQ);
  Tensor tSrQ_view = smem_thr_copy_q.retile_D(tSrQ);
  auto smem_copy_k = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_k = smem_copy_k.get_thread_slice(tid);
  auto smem_copy_v = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
  auto smem_thr_copy_v = smem_copy_v.get_thread_slice(tid);

  Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
  // Score columns of K sub-tile j: n-atoms [j * kKSubKeys / 8, (j + 1) * kKSubKeys / 8).
  Tensor acc_s_by_sub = logical_divide(acc_s, Shape<Underscore, Underscore, Int<kKSubKeys / 8>>{});
  Tensor acc_o = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<D>>{});  // (MMA, MMA_M, MMA_D)
  Tensor acc_o_by_slice = logical_divide(acc_o, Shape<Underscore, Underscore, Int<kVSliceCols / 8>>{});
  clear(acc_o);
  Tensor scores = make_tensor(acc_s.data(), acc_as_rows_cols(acc_s.layout()));  // (rows, cols)
  Tensor out_rc = make_tensor(acc_o.data(), acc_as_rows_cols(acc_o.layout()));
  Tensor coords_s = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
  Tensor coords_s_rc = make_tensor(coords_s.data(), acc_as_rows_cols(coords_s.layout()));
  constexpr int kRows = decltype(size<0>(scores))::value;
  OnlineSoftmax<kRows> softmax;
  softmax.reset();
  // The softmax and the LSE take softcap.logit_scale_log2(p.scale_log2): the capped scores' scale.
  const ScoreSoftcapFast<kCapped, true> softcap(p.softcap, p.scale_log2);  // the uncapped versions: none

  // Two-pass, second pass: the rows' final max and 1/sum come from the statistics pass.
  TwoPassRowStats<kRows> fixed;
  if constexpr (kPass == PrefillPass::kFromStats) fixed.load(p, seq, b, hq, row0, coords_s_rc, softmax);

  // ---- Main loop ----------------------------------------------------------------------------------------
  for (int nb = 0; nb < blk.n_blocks; ++nb) {
    const int n0 = keys.lo + nb * kN;
    clear(acc_s);
    CUTE_UNROLL
    for (int j = 0; j < kKSubTiles; ++j) {
      // Sub-tile j has landed once at most the later sub-tiles (and, after j = 0, V) are pending.
      cp_async_wait_pending(kKSubTiles - 1 - j + (kUsesV && j > 0 ? kVSlices : 0));
      __syncthreads();  // j = 0: also, every warp is done with the previous step's V
      if (kUsesV && j == 0) issue_v(n0);
      Tensor sK_sub = local_tile(sK, Shape<Int<kKSubKeys>, Int<D>>{}, make_coord(j, 0));
      Tensor tSsK = smem_thr_copy_k.partition_S(sK_sub);
      Tensor tSrK = thr_mma.partition_fragment_B(sK_sub);
      Tensor tSrK_view = smem_thr_copy_k.retile_D(tSrK);
      Tensor acc_sub = acc_s_by_sub(_, _, make_coord(_, j));
      gemm_smem_smem(tiled_mma, acc_sub, tSrQ, tSrK, tSsQ, tSsK, tSrQ_view, tSrK_view, smem_copy_q, smem_copy_k);
    }
    softcap.apply(acc_s);
    if (needs_mask<kVariants>(keys, n0, kN)) mask_scores<kVariants>(scores, coords_s_rc, p, seq, row0, n0, keys.hi);

    if constexpr (kPass == PrefillPass::kFromStats) {
      fixed.probabilities(scores, softcap.logit_scale_log2(p.scale_log2));
    } else {
      softmax.update(scores, out_rc, softcap.logit_scale_log2(p.scale_log2));
    }

    const bool more = nb + 1 < blk.n_blocks;
    if constexpr (!kUsesV) {
      __syncthreads();  // every warp is done with this step's K
      if (more) {
        issue_k(n0 + kN);
      } else {
        fence_empty(kKSubTiles);
      }
    } else {
      Tensor probs = convert_fragment<Element>(acc_s);
      Tensor tOrP = make_tensor(probs.data(), acc_as_a_operand(probs.layout()));  // A operand of P * V
      CUTE_UNROLL
      for (int v = 0; v < kVSlices; ++v) {
        cp_async_wait_pending(kVSlices - 1 - v + (v > 0 ? kKSubTiles : 0));
        __syncthreads();  // v = 0: also, every warp is done with this step's K
        if (v == 0) {
          if (more) {
            issue_k(n0 + kN);
          } else {
            fence_empty(kKSubTiles);
          }
        }
        Tensor sVt_slice = local_tile(sVt, Shape<Int<kVSliceCols>, Int<kN>>{}, make_coord(v, 0));
        Tensor tOsVt = smem_thr_copy_v.partition_S(sVt_slice);
        Tensor tOrVt = thr_mma.partition_fragment_B(sVt_slice);
        Tensor tOrVt_view = smem_thr_copy_v.retile_D(tOrVt);
        Tensor acc_slice = acc_o_by_slice(_, _, make_coord(_, v));
        gemm_reg_smem(tiled_mma, acc_slice, tOrP, tOrVt, tOsVt, tOrVt_view, smem_copy_v);
      }
    }
  }
  cp_async_wait<0>();

  // ---- Epilogue ---------------------------------------------------------------------------------------
  if constexpr (kPass != PrefillPass::kFromStats) softmax.reduce_sums();
  const bool quad_leader = tid % 4 == 0;
  if constexpr (kPass == PrefillPass::kStats) {
    store_two_pass_stats(p, seq, b, hq, row0, coords_s_rc, softmax, quad_leader);
  } else {
    float lse[kRows], inv[kRows];
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      lse[r] = softmax.lse(r, softcap.logit_scale_log2(p.scale_log2));
      // The second pass applied 1/sum already; the fused pass normalizes here.
      inv[r] = kPass == PrefillPass::kFromStats ? 1.f : (softmax.row_sum[r] > 0.f ? 1.f / softmax.row_sum[r] : 0.f);
    }
    Tensor coords_o = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<D>>{}));
    Tensor coords_o_rc = make_tensor(coords_o.data(), acc_as_rows_cols(coords_o.layout()));
    const TileRows<false> rows{hq, row0};
    fold_row_sinks<kVariants>(p, seq, rows, coords_o_rc, lse, inv);
    RowWriter<>{p, seq, b, split, rows}.write<Element, D>(out_rc, coords_o_rc, lse, inv, quad_leader);
  }
}

}  // namespace splitkv::detail
