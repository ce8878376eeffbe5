// Split-KV decode kernel (FlashDecoding class).
//
// Grid: (KV split, KV head x query tile, sequence). A block owns a tile of kBlockM (16; 32 in
// decode_mma_m32) of the q_len x (Hq/Hkv) query rows that share one KV head (GQA packing: each
// tile reads the KV head once) and one chunk of that sequence's keys; each warp computes all the
// tile's rows for its keys. Its warps take 16-key sub-tiles round-robin, each through a private multi-stage cp.async
// ring (kv_loader.cuh), so the main loop needs no block-wide barrier. Each warp keeps its own
// online-softmax state; the warps merge once at the end (warp_merge.cuh) and the block writes its
// rows through the epilogue: final O/LSE, or a partial (O_i, LSE_i) for the combine kernel, as
// p.output.mode says; or, when the splits of a row form one thread-block cluster (sm_90), into
// shared memory, merged across the cluster (cluster_combine.cuh).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/common/mma_layouts.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/score_softcap.cuh"
#include "kernels/decode/decode_block.cuh"
#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/decode_traits.cuh"
#include "kernels/decode/kv_loader.cuh"
#include "kernels/decode/l2_prefetch.cuh"
#include "kernels/decode/q_tile.cuh"

namespace splitkv::detail {

// kVariants: the variants instance (DecodeParams' softcap, sliding window and a single split's sinks,
// docs/VARIANTS.md), in two versions: kCapped, with the softcap (ScoreSoftcap), and without.
// kMinBlocksPerSm > 0: the uncapped version's twin register-bound for that many resident blocks
// per SM (Traits::kBoundVariantsBlocks, Plan::register_bound_blocks). 0 states no minimum: ptxas's
// own register choice, which an explicit minimum of 1 is not (docs/TUNING.md, "Kernels").
// kFoldSinks: the final rows fold p.sinks (a variants instance's; the launcher takes the uncapped
// version without it where p.sinks is null: several splits, whose sink the combine folds, or none).
template <class Traits, bool kVariants = false, bool kCapped = false, int kMinBlocksPerSm = 0,
          bool kFoldSinks = kVariants>
__global__ void __launch_bounds__(Traits::kThreads, kMinBlocksPerSm)
    decode_kernel(const __grid_constant__ DecodeParams p) {
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
  const int kv_head = p.m_tiles.div(blockIdx.y);
  const int m_tile = p.m_tiles.mod(blockIdx.y);
  const int b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (tid == 0) block_saw_bad_input = 0;

  const int row0 = m_tile * kM;  // first packed row of this tile
  const int rows_here = min(kM, p.rows_per_kv - row0);

  // Everything this kernel reads may come from the kernel before it in the stream; until that one
  // is done the block only warms L2. Our own dependents (the combine) may launch right away: they
  // wait for our completion themselves (not with a fused combine: allow_dependents_at_start).
  prefetch_block_start_to_l2<NativeCacheRows<Traits>, kVariants>(p, b, kv_head, split, row0, rows_here, tid);
  wait_for_prior_grids();
  allow_dependents_at_start(p);

  // ---- Shared memory: Q tile, then per-warp K/V rings (reused by the final merge) ----------------
  Element* smem_q = reinterpret_cast<Element*>(smem);
  Element* smem_kv = smem_q + kM * D;
  Element* smem_k = smem_kv + warp * 2 * kStages * kN * D;
  Element* smem_v = smem_k + kStages * kN * D;
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename Traits::SmemLayoutQ{});    // (M, D)
  Tensor sK = make_tensor(make_smem_ptr(smem_k), typename Traits::SmemLayoutKV{});   // (N, D, S)
  Tensor sV = make_tensor(make_smem_ptr(smem_v), typename Traits::SmemLayoutKV{});   // (N, D, S)
  Tensor sVt = make_tensor(make_smem_ptr(smem_v), typename Traits::SmemLayoutVt{});  // (D, N, S)

  load_q_tile<Traits>(p, sQ, b, kv_head, row0, rows_here, tid);
  cp_async_fence();

  // ---- Which keys this block reads ---------------------------------------------------------------
  const DecodeKeyRange keys = decode_key_range<Traits::kBlockKeys, kVariants>(p, b, split, row0, rows_here);
  const int n_subtiles = subtile_count<kN>(keys);
  const int my_subtiles = n_subtiles > warp ? (n_subtiles - warp + kWarps - 1) / kWarps : 0;
  if (block_reads_no_key(p, keys)) {  // before the key loop's state exists (its registers)
    write_rows_of_no_key<Element, kM, D, Traits::kThreads, kFoldSinks>(p, b, kv_head, split, row0, rows_here);
    return;
  }

  DecodeKvLoader<Traits, decltype(sK), decltype(sV)> kv(p, sK, sV, b, kv_head, keys.lo, keys.hi, warp, lane);
  CUTE_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < my_subtiles) kv.issue(s, s);
    cp_async_fence();
  }

  // ---- Q to registers once its copy group has landed -------------------------------------------------
  cp_async_wait<kStages - 1>();
  __syncthreads();
  typename Traits::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(lane);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);  // (MMA, MMA_M, MMA_K)
  auto smem_copy_q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_q = smem_copy_q.get_thread_slice(lane);
  Tensor tSsQ = smem_thr_copy_q.partition_S(sQ);                // (CPY, CPY_M, CPY_K)
  Tensor tSrQ_view = smem_thr_copy_q.retile_D(tSrQ);
  // A 16-row tile holds all of Q in registers (32 per thread). A 32-row tile would need 64 next to
  // its 128-register O accumulator and spilled inside the key loop (docs/TUNING.md, "Kernels"), so it
  // reloads each k-step's Q fragment from shared memory, where Q stays for the whole loop.
  constexpr bool kQFromSmem = kM > 16;
  if constexpr (!kQFromSmem) copy(smem_copy_q, tSsQ, tSrQ_view);

  auto smem_copy_k = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_thr_copy_k = smem_copy_k.get_thread_slice(lane);
  Tensor tSsK = smem_thr_copy_k.partition_S(sK);                 // (CPY, CPY_N, CPY_K, S)
  Tensor tSrK = thr_mma.partition_fragment_B(sK(_, _, 0));       // (MMA, MMA_N, MMA_K)
  Tensor tSrK_view = smem_thr_copy_k.retile_D(tSrK);
  auto smem_copy_v = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
  auto smem_thr_copy_v = smem_copy_v.get_thread_slice(lane);
  Tensor tOsVt = smem_thr_copy_v.partition_S(sVt);               // (CPY, CPY_N, CPY_K, S)
  Tensor tOrVt = thr_mma.partition_fragment_B(sVt(_, _, 0));     // (MMA, MMA_N, MMA_K)
  Tensor tOrVt_view = smem_thr_copy_v.retile_D(tOrVt);

  Tensor acc_o = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<D>>{});  // (MMA, MMA_M, MMA_N)
  clear(acc_o);
  Tensor acc_o_rc = make_tensor(acc_o.data(), acc_as_rows_cols(acc_o.layout()));  // (rows, cols)
  constexpr int kRows = decltype(size<0>(acc_o_rc))::value;  // the thread's rows: 2 per 16 tile rows
  OnlineSoftmax<kRows> softmax;
  softmax.reset();

  // (row, key) coordinates of this thread's score elements, and each row's visible-key end.
  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), acc_as_rows_cols(tScS.layout()));
  int row_end[kRows], row_start[kRows];
  int row_tree[kRows];  // kVariants: where each row's tree-mask bits start (tree_row)
  visible_row_ends<kVariants>(p, keys, row0, tScS_rc, row_end, &row_start, &row_tree);
  static_assert(kVariants || !kCapped, "the capped version is a variants instance's");
  const ScoreSoftcap<kCapped> softcap(p.softcap, p.scale_log2);

  // ---- Main loop over this warp's sub-tiles --------------------------------------------------------
  for (int n = 0; n < my_subtiles; ++n) {
    cp_async_wait<kStages - 2>();
    __syncwarp();  // sub-tile n visible to all lanes; all lanes are done with sub-tile n - 1
    if (n + kStages - 1 < my_subtiles) kv.issue(n + kStages - 1, (n + kStages - 1) % kStages);
    cp_async_fence();
    const int stage = n % kStages;
    const int t0 = kv.subtile_start(n);

    Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
    clear(acc_s);
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tSrK); ++k) {
      if constexpr (kQFromSmem) copy(smem_copy_q, tSsQ(_, _, k), tSrQ_view(_, _, k));
      copy(smem_copy_k, tSsK(_, _, k, stage), tSrK_view(_, _, k));
      gemm(tiled_mma, tSrQ(_, _, k), tSrK(_, _, k), acc_s);
    }
    softcap.apply(acc_s);
    Tensor scores = make_tensor(acc_s.data(), acc_as_rows_cols(acc_s.layout()));  // (2, 4)
    mask_row_keys<kVariants>(scores, tScS_rc, t0, kN, row_start, row_end, row_tree, keys);
    softmax.update(scores, acc_o_rc, p.scale_log2);

    Tensor probs = convert_fragment<Element>(acc_s);
    Tensor tOrP = make_tensor(probs.data(), acc_as_a_operand(probs.layout()));  // A operand of P * V
    copy(smem_copy_v, tOsVt(_, _, _, stage), tOrVt_view);
    gemm(tiled_mma, tOrP, tOrVt, acc_o);
  }
  cp_async_wait<0>();
  softmax.reduce_sums();

  // ---- Merge the warps' states (fixed order: deterministic), then write --------------------------
  __syncthreads();  // every warp is done with its ring: the merge buffers overlay it
  using MergeSmem = WarpMergeSmem<kWarps, kM, D>;
  const MergeSmem merge(reinterpret_cast<char*>(smem_kv));
  // The inbox of a cluster merge (none in the short-block twin for one-split plans, whose launcher
  // never sets p.cluster_combine for it: decode_launch.cuh).
  char* cluster_inbox = reinterpret_cast<char*>(smem_kv) + MergeSmem::kBytes;
  static_assert(kM * D * sizeof(Element) + MergeSmem::kBytes +
                    (Traits::kTile.cluster_inbox ? tiles::cluster_inbox_bytes(kM, D) : 0) <=
                Traits::kSmemBytes);
  hand_inbox_to_cluster<kM, D, Traits::kThreads>(p, cluster_inbox);
  store_warp_state<kM, D>(merge, warp, lane, thr_mma, acc_o, tScS_rc, softmax);
  if (keys.bad_input || kv.bad_input) block_saw_bad_input = 1;
  __syncthreads();
  constexpr int kStagingBytes = Traits::kSmemBytes - kM * D * int(sizeof(Element));  // all but Q
  static_assert(kVariants || !kFoldSinks, "sinks are a variant");
  finish_decode_block<Element, kWarps, kM, D, Traits::kThreads, kStagingBytes, kFoldSinks>(
      p, merge, cluster_inbox, reinterpret_cast<char*>(smem_kv), block_saw_bad_input != 0, b, kv_head, split, row0,
      rows_here, p.scale_log2, 1.f);
}

}  // namespace splitkv::detail
