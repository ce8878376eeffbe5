// Decode over short key ranges, one warp per item (issue 53's gpt-oss rows: a window of ~128 keys
// over many sequences). A persistent grid of blocks of kStreamWarps independent warps; warp w of
// block i serves the items (sequence, KV head, query tile) i * kStreamWarps + w, then a whole
// grid's worth of warps further, and so on. Each item is the one-split decode block's work done by
// one warp: its Q tile and its own cp.async ring of 16-key sub-tiles in the warp's slice of shared
// memory, the online softmax, and the final rows written straight from the accumulator (one warp:
// nothing to merge, no block barrier); the next item's Q tile and first sub-tiles are issued before
// the current item's rows are written. Where the block kernel's rounds of short blocks start and
// end together (every block loading, then every block merging and writing), the warps here drift
// apart, so some are always loading while others compute or write.
//
// Plans: one split, final rows, the uncapped variants instance (window, sinks, tree masks) of the
// 16-bit cache; the launcher takes it where the plan asks (Plan::persistent_blocks on a decode
// plan). Each warp's shared memory: its Q tile, then its K and V rings.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/epilogue.cuh"
#include "kernels/common/mma_layouts.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/score_softcap.cuh"
#include "kernels/decode/decode_block.cuh"
#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/decode_traits.cuh"
#include "kernels/decode/kv_loader.cuh"
#include "kernels/decode/q_tile.cuh"

namespace splitkv::detail {

// Shared memory of one warp of the stream kernel (Traits: a one-warp DecodeTraits).
template <class Traits>
inline constexpr int kStreamWarpSmemBytes =
    (Traits::kBlockM * Traits::kHeadDim + 2 * Traits::kStages * Traits::kWarpKeys * Traits::kHeadDim) *
    int(sizeof(typename Traits::Element));

template <class Traits, int kStreamWarps, int kMinBlocksPerSm, bool kFoldSinks>
__global__ void __launch_bounds__(32 * kStreamWarps, kMinBlocksPerSm)
    decode_stream_kernel(const __grid_constant__ DecodeParams p) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kWarpKeys;
  constexpr int kStages = Traits::kStages;
  static_assert(Traits::kWarps == 1, "one warp per item");
  static_assert(Traits::kThreads == 32);

  extern __shared__ __align__(128) char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Element* smem_q = reinterpret_cast<Element*>(smem + warp * kStreamWarpSmemBytes<Traits>);
  Element* smem_k = smem_q + kM * D;
  Element* smem_v = smem_k + kStages * kN * D;
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename Traits::SmemLayoutQ{});    // (M, D)
  Tensor sK = make_tensor(make_smem_ptr(smem_k), typename Traits::SmemLayoutKV{});   // (N, D, S)
  Tensor sV = make_tensor(make_smem_ptr(smem_v), typename Traits::SmemLayoutKV{});   // (N, D, S)
  Tensor sVt = make_tensor(make_smem_ptr(smem_v), typename Traits::SmemLayoutVt{});  // (D, N, S)

  typename Traits::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(lane);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);  // (MMA, MMA_M, MMA_K)
  auto smem_copy_q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_q = smem_copy_q.get_thread_slice(lane);
  Tensor tSsQ = smem_thr_copy_q.partition_S(sQ);  // (CPY, CPY_M, CPY_K)
  Tensor tSrQ_view = smem_thr_copy_q.retile_D(tSrQ);
  auto smem_copy_k = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_k = smem_copy_k.get_thread_slice(lane);
  Tensor tSsK = smem_thr_copy_k.partition_S(sK);            // (CPY, CPY_N, CPY_K, S)
  Tensor tSrK = thr_mma.partition_fragment_B(sK(_, _, 0));  // (MMA, MMA_N, MMA_K)
  Tensor tSrK_view = smem_thr_copy_k.retile_D(tSrK);
  auto smem_copy_v = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
  auto smem_thr_copy_v = smem_copy_v.get_thread_slice(lane);
  Tensor tOsVt = smem_thr_copy_v.partition_S(sVt);            // (CPY, CPY_N, CPY_K, S)
  Tensor tOrVt = thr_mma.partition_fragment_B(sVt(_, _, 0));  // (MMA, MMA_N, MMA_K)
  Tensor tOrVt_view = smem_thr_copy_v.retile_D(tOrVt);
  // (row, key) of this thread's score elements and (row, column) of its output elements.
  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), acc_as_rows_cols(tScS.layout()));
  Tensor tOcO = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<D>>{}));
  Tensor tOcO_rc = make_tensor(tOcO.data(), acc_as_rows_cols(tOcO.layout()));
  const ScoreSoftcap<false> softcap(p.softcap, p.scale_log2);

  wait_for_prior_grids();
  allow_dependents_at_start(p);

  // Item indices in 32 bits (the launcher takes no grid past INT_MAX items): a 64-bit division
  // is a call.
  const int tiles_per_sequence = p.num_kv_heads * p.m_tiles.divisor;  // grid y of the block kernel
  const int items = p.batch * tiles_per_sequence;
  const int stride = int(gridDim.x) * kStreamWarps;
  // An item's coordinates and keys; starting it issues its Q tile and first kStages - 1 sub-tiles
  // (the next item is started before the current one's rows are written, so its loads are in
  // flight while the warp normalizes and stores).
  struct StreamItem {
    int b = 0, kv_head = 0, row0 = 0, rows_here = 0;
    DecodeKeyRange keys{};
    bool bad_pages = false;
  };
  auto start_item = [&](int item) {
    StreamItem it;
    it.b = item / tiles_per_sequence;
    const int y = item - it.b * tiles_per_sequence;
    it.kv_head = p.m_tiles.div(y);
    it.row0 = (y - it.kv_head * p.m_tiles.divisor) * kM;
    it.rows_here = min(kM, p.rows_per_kv - it.row0);
    load_q_tile<Traits>(p, sQ, it.b, it.kv_head, it.row0, it.rows_here, lane);
    cp_async_fence();
    it.keys = decode_key_range<Traits::kBlockKeys, true>(p, it.b, 0, it.row0, it.rows_here);
    const int n_subtiles = subtile_count<kN>(it.keys);
    DecodeKvLoader<Traits, decltype(sK), decltype(sV)> kv(p, sK, sV, it.b, it.kv_head, it.keys.lo, it.keys.hi, 0, lane);
    CUTE_UNROLL
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n_subtiles) kv.issue(s, s);
      cp_async_fence();
    }
    it.bad_pages = kv.bad_input;
    return it;
  };

  int item = int(blockIdx.x) * kStreamWarps + warp;
  StreamItem cur;
  if (item < items) cur = start_item(item);
  while (item < items) {
    const int b = cur.b, kv_head = cur.kv_head, row0 = cur.row0, rows_here = cur.rows_here;
    const DecodeKeyRange& keys = cur.keys;
    const int n_subtiles = subtile_count<kN>(keys);
    // Issues this item's sub-tiles from kStages - 1 on (start_item issued the first ones).
    DecodeKvLoader<Traits, decltype(sK), decltype(sV)> kv(p, sK, sV, b, kv_head, keys.lo, keys.hi, 0, lane);

    Tensor acc_o = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<D>>{});  // (MMA, MMA_M, MMA_N)
    clear(acc_o);
    Tensor acc_o_rc = make_tensor(acc_o.data(), acc_as_rows_cols(acc_o.layout()));  // (rows, cols)
    constexpr int kRows = decltype(size<0>(acc_o_rc))::value;
    OnlineSoftmax<kRows> softmax;
    softmax.reset();
    int row_end[kRows], row_start[kRows], row_tree[kRows];
    visible_row_ends<true>(p, keys, row0, tScS_rc, row_end, &row_start, &row_tree);

    cp_async_wait<kStages - 1>();  // the Q tile
    __syncwarp();
    for (int n = 0; n < n_subtiles; ++n) {
      cp_async_wait<kStages - 2>();
      __syncwarp();  // sub-tile n visible to every lane; every lane is done with sub-tile n - 1
      if (n + kStages - 1 < n_subtiles) kv.issue(n + kStages - 1, (n + kStages - 1) % kStages);
      cp_async_fence();
      const int stage = n % kStages;
      const int t0 = kv.subtile_start(n);
      Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
      clear(acc_s);
      CUTE_UNROLL
      for (int k = 0; k < size<2>(tSrK); ++k) {
        copy(smem_copy_q, tSsQ(_, _, k), tSrQ_view(_, _, k));  // Q stays in shared memory (32 rows)
        copy(smem_copy_k, tSsK(_, _, k, stage), tSrK_view(_, _, k));
        gemm(tiled_mma, tSrQ(_, _, k), tSrK(_, _, k), acc_s);
      }
      softcap.apply(acc_s);
      Tensor scores = make_tensor(acc_s.data(), acc_as_rows_cols(acc_s.layout()));
      mask_row_keys<true>(scores, tScS_rc, t0, kN, row_start, row_end, row_tree, keys);
      softmax.update(scores, acc_o_rc, p.scale_log2);
      Tensor probs = convert_fragment<Element>(acc_s);
      Tensor tOrP = make_tensor(probs.data(), acc_as_a_operand(probs.layout()));  // A operand of P * V
      copy(smem_copy_v, tOsVt(_, _, _, stage), tOrVt_view);
      gemm(tiled_mma, tOrP, tOrVt, acc_o);
    }
    cp_async_wait<0>();
    softmax.reduce_sums();
    const bool poisoned = __any_sync(0xffffffffu, keys.bad_input || cur.bad_pages || kv.bad_input);
    __syncwarp();  // every lane is done with this item's Q tile and ring: the next item's loads may land
    const int next = item < items - stride ? item + stride : items;  // no overflow past INT_MAX
    StreamItem following;
    if (next < items) following = start_item(next);

    // ---- The item's final rows, from the accumulator: O / sum and the natural-log LSE (zeros and
    // -inf for a row that saw no key), the head's sink folded in; NaN where the input was bad. ----
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int local = get<0>(tOcO_rc(r, 0));
      if (local >= rows_here) continue;
      const float sum = softmax.row_sum[r];
      float lse = sum > 0.f ? (softmax.row_max[r] * p.scale_log2 + log2f(sum)) * kLn2 : kNegInf;
      float inv = sum > 0.f ? 1.f / sum : 0.f;
      const PackedRow at = packed_row(p, kv_head, row0 + local);
      if constexpr (kFoldSinks) {
        if (p.sinks != nullptr) inv *= fold_sink(p.sinks[at.head * p.sinks_stride], &lse);
      }
      // Final rows only (the launcher takes no other plan), stored without write_output: its other
      // modes, compiled in beside them, doubled the kernel's code, and its warps, which drift
      // apart, then waited on the instruction cache. The row's address once.
      Element* out_row = final_row<Element>(p.output, b, at.head, at.query);
      CUTE_UNROLL
      for (int c = 0; c < size<1>(acc_o_rc); c += 2) {  // adjacent column pairs
        const float pair[2] = {acc_o_rc(r, c) * inv, acc_o_rc(r, c + 1) * inv};
        *reinterpret_cast<cutlass::Array<Element, 2>*>(out_row + get<1>(tOcO_rc(r, c))) =
            final_values<Element>(pair, poisoned);
      }
      if (lane % 4 == 0 && p.output.lse != nullptr) {
        final_lse(p.output, b, at.head, at.query) = poisoned ? kOutputNaN : lse;
      }
    }
    cur = following;
    item = next;
  }
}

}  // namespace splitkv::detail
