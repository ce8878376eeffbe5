// Split-KV decode over a quantized KV cache (FP8, INT8, INT4, K8V4): the decode_mma kernel's
// block (same grid, GQA packing, split rule, causal rule, warp merge, epilogue and cluster
// combine; decode/decode_block.cuh) with K and V read as codes. Each warp streams its 16-key
// sub-tiles through a private cp.async ring that holds the codes as stored (a stage is a quarter
// to a half of a 16-bit one, so the ring is deeper); the codes become fp16 MMA operands in
// registers (quant_operands.cuh), so no dequantized copy of the cache exists anywhere.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/mma_layouts.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/score_softcap.cuh"
#include "kernels/decode_quant/quant_decode_block.cuh"
#include "kernels/decode_quant/quant_decode_traits.cuh"
#include "kernels/decode_quant/quant_operands.cuh"

namespace splitkv::detail {

// kVariants: the variants instance (DecodeParams' softcap, sliding window and a single split's sinks,
// docs/VARIANTS.md), in two versions: kCapped, with the softcap (ScoreSoftcap), and without.
template <class Traits, bool kVariants = false, bool kCapped = false>
__global__ void __launch_bounds__(Traits::kThreads, kVariants ? Traits::kVariantsMinBlocksPerSm : Traits::kMinBlocksPerSm)
    quant_decode_kernel(const __grid_constant__ DecodeParams p) {
  using namespace cute;
  constexpr int D = Traits::kHeadDim;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kWarpKeys;
  static_assert(!Traits::kChannelKeys, "keys per channel: the keys-as-rows kernel only");

  // Shared memory: the Q tile (row-major), then per-warp rings of codes (reused by the merge).
  extern __shared__ __align__(128) char smem[];
  __shared__ int block_saw_bad_input;

  const QuantBlockCoords at = QuantBlockCoords::of_this_block<kM>(p);
  const int tid = threadIdx.x, lane = tid % 32;
  const DecodeKeyRange keys = start_quant_block<Traits, kVariants>(p, at, smem, tid, block_saw_bad_input);
  if (block_reads_no_key(p, keys)) {  // before the key loop's state exists (its registers)
    write_rows_of_no_key<typename Traits::Element, kM, D, Traits::kThreads, kVariants>(p, at.b, at.kv_head, at.split,
                                                                                       at.row0, at.rows_here);
    return;
  }
  int my_subtiles;
  QuantKvLoader<Traits> kv = start_quant_ring<Traits>(p, at, smem, tid, keys, my_subtiles);

  // ---- Q to registers -------------------------------------------------------------------------------
  QuantQFragment<Traits> q;
  q.load(reinterpret_cast<const typename Traits::Element*>(smem), lane);
  // Scores come out in units of the shifted Q (and, for FP8, of the unscaled keys).
  float k_scale, v_scale;
  fp8_head_scales<Traits>(k_scale, v_scale);
  const float scale_log2 = p.scale_log2 * q.unshift * k_scale;
  static_assert(kVariants || !kCapped, "the capped version is a variants instance's");
  const ScoreSoftcap<kCapped> softcap(p.softcap, scale_log2);

  typename Traits::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(lane);
  Tensor acc_o = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<D>>{});  // (MMA, MMA_M, MMA_N)
  clear(acc_o);
  Tensor acc_o_rc = make_tensor(acc_o.data(), acc_as_rows_cols(acc_o.layout()));  // (rows, cols)
  OnlineSoftmax<2> softmax;
  softmax.reset();

  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), acc_as_rows_cols(tScS.layout()));
  int row_end[2], row_start[2];
  int row_tree[2];  // kVariants: where each row's tree-mask bits start (tree_row)
  visible_row_ends<kVariants>(p, keys, at.row0, tScS_rc, row_end, &row_start, &row_tree);
  const QuantLaneReads<Traits> reads(lane);

  // ---- Main loop over this warp's sub-tiles ----------------------------------------------------------
  for (int n = 0; n < my_subtiles; ++n) {
    const char* stage = kv.next_to_read(n, my_subtiles);
    Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
    clear(acc_s);
    quant_scores<Traits>(q, stage, reads, acc_s);
    if constexpr (Traits::kTokenScales) fold_k_scales<Traits>(q, stage + Traits::kKScaleOffset, lane, acc_s);
    softcap.apply(acc_s);
    Tensor scores = make_tensor(acc_s.data(), acc_as_rows_cols(acc_s.layout()));  // (2, 4)
    mask_row_keys<kVariants>(scores, tScS_rc, kv.subtile_start(n), kN, row_start, row_end, row_tree, keys);
    float rescale[2];
    softmax.fold(scores, scale_log2, rescale);
    // Once a block's row maxima settle they rarely move: O is not multiplied by 1 (same bits). The
    // compiler predicates this multiply (an issue slot per element either way); a real branch
    // here measured slower on short rows, where P . V's loads then wait for the softmax
    // (docs/TUNING.md, "Kernels").
    if (!__all_sync(0xffffffffu, rescale[0] == 1.f && rescale[1] == 1.f)) {
      OnlineSoftmax<2>::rescale_rows(acc_o_rc, rescale);
    }
    quant_accumulate_pv<Traits>(acc_s, stage, reads, lane, acc_o);
  }
  cp_async_wait<0>();
  softmax.reduce_sums();

  // At the register bound (three blocks per SM: INT4) the epilogue is a call, so its code cannot
  // make the key loop spill (finish_decode_block_out_of_line).
  constexpr bool kEpilogueOutOfLine = Traits::kMinBlocksPerSm > 1;
  finish_quant_block<Traits, kEpilogueOutOfLine, kVariants>(p, at, smem, tid, keys.bad_input || kv.bad_input, block_saw_bad_input,
                                                 scale_log2, v_scale, [&](const auto& merge, int warp) {
                                                   store_warp_state<kM, D>(merge, warp, lane, thr_mma, acc_o, tScS_rc,
                                                                           softmax, QuantOColumns<Traits>{});
                                                 });
}

}  // namespace splitkv::detail
