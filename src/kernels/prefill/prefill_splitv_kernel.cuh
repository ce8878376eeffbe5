// Split-V prefill (one of the original design's strategies): the warps of a block partition the head-dim
// columns of V and O instead of the query rows. Every warp computes the whole score tile Q K^T of
// the block (recomputing what its siblings compute) and so owns whole score rows: the softmax needs
// no exchange between warps. The price is kWarps times the Q K^T work; it is measured against the
// default, not assumed to win.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/pdl.cuh"
#include "kernels/prefill/prefill_common.cuh"
#include "kernels/prefill/prefill_traits.cuh"

namespace splitkv::detail {

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads) prefill_splitv_kernel(const __grid_constant__ PrefillParams p) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kBlockN;
  constexpr int kWarps = Traits::kWarps;
  constexpr int kCols = D / kWarps;  // head-dim columns of O per warp
  static_assert(kCols % 16 == 0 && Traits::kVSlices == 1 && Traits::kKSubTiles == 1);

  extern __shared__ __align__(128) char smem[];
  wait_for_prior_grids();
  allow_dependent_launch();
  PrefillBlock<Element> blk;
  if (!blk.init(p, kM, kN)) return;  // no such rows in this sequence
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const PrefillSequence& seq = blk.seq;
  const KeyRange& keys = blk.keys;
  const int b = blk.b, hq = blk.hq, split = blk.split, row0 = blk.row0;

  Tensor sQ = Traits::smem_q(smem);    // (M, D)
  Tensor sK = Traits::smem_k(smem);    // (N, D)
  Tensor sV = Traits::smem_v(smem);    // (N, D)
  Tensor sVt = Traits::smem_vt(smem);  // (D, N)

  const Element* k_base = blk.k_base;
  const Element* v_base = blk.v_base;
  typename Traits::GmemCopyRows copy_rows;
  auto thr_copy_rows = copy_rows.get_thread_slice(tid);
  auto tile_at = [](const Element* base, int64_t token_stride, int n0) {
    return make_tensor(make_gmem_ptr(base + int64_t(n0) * token_stride), Shape<Int<kN>, Int<D>>{},
                       make_stride(token_stride, _1{}));
  };
  copy_rows_zfill(copy_rows, thr_copy_rows,
                  make_tensor(make_gmem_ptr(blk.q_base), Shape<Int<kM>, Int<D>>{}, make_stride(p.q_token_stride, _1{})),
                  sQ, blk.rows_here);
  if (blk.n_blocks > 0) copy_rows_zfill(copy_rows, thr_copy_rows, tile_at(k_base, p.kv.k.token_stride, keys.lo), sK, seq.k_len - keys.lo);
  cp_async_fence();

  // ---- Per-warp MMA: the whole (M, N) score tile, and this warp's (M, kCols) slice of O ---------
  typename Traits::WarpMma warp_mma;
  auto thr_mma = warp_mma.get_thread_slice(lane);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);
  auto smem_copy_q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, warp_mma);
  auto smem_thr_copy_q = smem_copy_q.get_thread_slice(lane);
  Tensor tSsQ = smem_thr_copy_q.partition_S(sQ);
  Tensor tSrQ_view = smem_thr_copy_q.retile_D(tSrQ);
  auto smem_copy_k = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, warp_mma);
  auto smem_thr_copy_k = smem_copy_k.get_thread_slice(lane);
  Tensor tSsK = smem_thr_copy_k.partition_S(sK);
  Tensor tSrK = thr_mma.partition_fragment_B(sK);
  Tensor tSrK_view = smem_thr_copy_k.retile_D(tSrK);
  Tensor sVt_mine = local_tile(sVt, Shape<Int<kCols>, Int<kN>>{}, make_coord(warp, 0));  // (kCols, N)
  auto smem_copy_v = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, warp_mma);
  auto smem_thr_copy_v = smem_copy_v.get_thread_slice(lane);
  Tensor tOsVt = smem_thr_copy_v.partition_S(sVt_mine);
  Tensor tOrVt = thr_mma.partition_fragment_B(sVt_mine);
  Tensor tOrVt_view = smem_thr_copy_v.retile_D(tOrVt);

  Tensor acc_s = partition_fragment_C(warp_mma, Shape<Int<kM>, Int<kN>>{});
  Tensor acc_o = partition_fragment_C(warp_mma, Shape<Int<kM>, Int<kCols>>{});
  clear(acc_o);
  Tensor scores = make_tensor(acc_s.data(), acc_as_rows_cols(acc_s.layout()));
  Tensor out_rc = make_tensor(acc_o.data(), acc_as_rows_cols(acc_o.layout()));
  Tensor coords_s = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
  Tensor coords_s_rc = make_tensor(coords_s.data(), acc_as_rows_cols(coords_s.layout()));
  constexpr int kRows = decltype(size<0>(scores))::value;
  OnlineSoftmax<kRows> softmax;
  softmax.reset();

  for (int nb = 0; nb < blk.n_blocks; ++nb) {
    const int n0 = keys.lo + nb * kN;
    cp_async_wait<0>();
    __syncthreads();  // K landed; every warp is done with the previous V
    copy_rows_zfill(copy_rows, thr_copy_rows, tile_at(v_base, p.kv.v.token_stride, n0), sV, seq.k_len - n0);
    cp_async_fence();
    clear(acc_s);
    gemm_smem_smem(warp_mma, acc_s, tSrQ, tSrK, tSsQ, tSsK, tSrQ_view, tSrK_view, smem_copy_q, smem_copy_k);
    if (n0 + kN > keys.mask_from) mask_scores(scores, coords_s_rc, p, seq, row0, n0, keys.hi);
    softmax.update(scores, out_rc, p.scale_log2);
    cp_async_wait<0>();
    __syncthreads();  // V landed; every warp is done with K
    if (nb + 1 < blk.n_blocks) {
      copy_rows_zfill(copy_rows, thr_copy_rows, tile_at(k_base, p.kv.k.token_stride, n0 + kN), sK, seq.k_len - n0 - kN);
      cp_async_fence();
    }
    Tensor probs = convert_fragment<Element>(acc_s);
    Tensor tOrP = make_tensor(probs.data(), acc_as_a_operand(probs.layout()));
    gemm_reg_smem(warp_mma, acc_o, tOrP, tOrVt, tOsVt, tOrVt_view, smem_copy_v);
  }
  cp_async_wait<0>();

  softmax.reduce_sums();
  float lse[kRows], inv[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    lse[r] = softmax.lse(r, p.scale_log2);
    inv[r] = softmax.row_sum[r] > 0.f ? 1.f / softmax.row_sum[r] : 0.f;
  }
  // Coordinates of this warp's O slice within the block's (M, D) tile.
  Tensor coords_o = thr_mma.partition_C(
      local_tile(make_identity_tensor(Shape<Int<kM>, Int<D>>{}), Shape<Int<kM>, Int<kCols>>{}, make_coord(0, warp)));
  Tensor coords_o_rc = make_tensor(coords_o.data(), acc_as_rows_cols(coords_o.layout()));
  RowWriter<>{p, seq, b, split, {hq, row0}}.write<Element, D>(out_rc, coords_o_rc, lse, inv, warp == 0 && lane % 4 == 0);
}

}  // namespace splitkv::detail
