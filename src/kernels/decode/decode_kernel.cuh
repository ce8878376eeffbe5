// Split-KV decode kernel (FlashDecoding class).
//
// Grid: (KV split, KV head x query tile, sequence). A block owns the q_len x (Hq/Hkv) query rows
// that share one KV head (GQA packing: each KV head is read once) and one chunk of that sequence's
// keys. Its warps take 16-key sub-tiles round-robin, each through a private multi-stage cp.async
// ring, so the main loop needs no block-wide barrier. Each warp keeps its own online-softmax state;
// the warps merge once at the end. With one split the block writes O (and LSE) directly; otherwise
// it produces a partial (O_i, LSE_i): in global memory for the combine kernel, or, when the
// splits of a row form one thread-block cluster (sm_90), in shared memory, merged right here.
#pragma once

#include <cooperative_groups.h>

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

#include "kernels/common/combine_state.cuh"

#include "kernels/common/mma_layouts.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/split_rule.hpp"
#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/decode_traits.cuh"

namespace splitkv::detail {

// Page ids for a warp's upcoming sub-tiles, prefetched 32 at a time (one per lane) so the table
// lookup is off the critical path of issuing the next copy.
struct PageIdCache {
  int base = -32;  // sub-tile index held by lane 0
  int ids = 0;

  template <class LoadFn>
  __device__ __forceinline__ int get(int subtile, int lane, LoadFn&& load_page_id) {
    if (subtile - base >= 32) {  // warp-uniform
      base = subtile;
      ids = load_page_id(subtile + lane);
    }
    return __shfl_sync(0xffffffffu, ids, subtile - base);
  }
};

// Writes 4 columns of O, from column `col`, for packed row `row` of the KV head's query rows, and
// the row's LSE with the first columns.
template <class Element>
__device__ __forceinline__ void store_output_row(const DecodeParams& p, int b, int kv_head, int row, int col,
                                                 const float (&o)[4], float lse) {
  const int i = row / p.group, hq = kv_head * p.group + row % p.group;
  cutlass::Array<Element, 4> packed;
#pragma unroll
  for (int j = 0; j < 4; ++j) packed[j] = Element(o[j]);
  Element* out = static_cast<Element*>(p.out) + b * p.o_batch_stride + i * p.o_token_stride + hq * p.o_head_stride + col;
  *reinterpret_cast<cutlass::Array<Element, 4>*>(out) = packed;
  if (p.lse != nullptr && col == 0) p.lse[b * p.lse_batch_stride + hq * p.lse_head_stride + i * p.lse_token_stride] = lse;
}

// The splits of one (sequence, KV head, query tile) are the blocks of one cluster; each left its
// partial (O normalized, LSE) for rows [0, rows_here) in its own shared memory. Rank k merges
// the 4-column chunks k, k + ranks, ... of every row, reading all ranks' partials through
// distributed shared memory in rank order (deterministic). No workspace, no second kernel.
template <class Element, int kHeadDim, int kThreads>
__device__ __forceinline__ void combine_across_cluster(const DecodeParams& p, float* partial_o, float* partial_lse,
                                                       int b, int kv_head, int row0, int rows_here) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every rank's partial is in place
  const int ranks = int(cluster.num_blocks()), me = int(cluster.block_rank());
  constexpr int kChunks = kHeadDim / 4;
  constexpr int kInFlight = 4;
  const int my_chunks = (kChunks - me + ranks - 1) / ranks;
  for (int item = threadIdx.x; item < rows_here * my_chunks; item += kThreads) {
    const int r = item / my_chunks, chunk = me + (item % my_chunks) * ranks;
    CombineState state;
    bool nan_seen = false;  // a poisoned split (bad input) poisons the row
    for (int k0 = 0; k0 < ranks; k0 += kInFlight) {
      float lse[kInFlight];
      float4 o[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const int k = k0 + j < ranks ? k0 + j : 0;
        const float* remote_lse = cluster.map_shared_rank(partial_lse, k);
        const float4* remote_o = reinterpret_cast<const float4*>(cluster.map_shared_rank(partial_o, k));
        lse[j] = k0 + j < ranks ? remote_lse[r] : kNegInf;
        o[j] = k0 + j < ranks ? remote_o[r * kChunks + chunk] : make_float4(0.f, 0.f, 0.f, 0.f);
        nan_seen |= isnan(lse[j]);
      }
      state.fold(lse, o);
    }
    float out[4];
    float lse = state.finish(out);
    if (nan_seen) out[0] = out[1] = out[2] = out[3] = lse = __int_as_float(0x7fc00000);
    store_output_row<Element>(p, b, kv_head, row0 + r, chunk * 4, out, lse);
  }
  cluster.sync();  // our shared memory stays alive until every rank has read it
#endif
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads) decode_kernel(const __grid_constant__ DecodeParams p) {
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
  if (tid == 0) block_saw_bad_input = 0;

  // Everything this kernel reads may come from the kernel before it in the stream. Our own
  // dependents (the combine) may launch right away: they wait for our completion themselves.
  wait_for_prior_grids();
  allow_dependent_launch();

  const int row0 = m_tile * kM;  // first packed row of this tile
  const int rows_here = min(kM, p.rows_per_kv - row0);

  // ---- Shared memory: Q tile, then per-warp K/V rings (reused by the final merge) ----------------
  Element* smem_q = reinterpret_cast<Element*>(smem);
  Element* smem_kv = smem_q + kM * D;
  Element* smem_k = smem_kv + warp * 2 * kStages * kN * D;
  Element* smem_v = smem_k + kStages * kN * D;
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename Traits::SmemLayoutQ{});    // (M, D)
  Tensor sK = make_tensor(make_smem_ptr(smem_k), typename Traits::SmemLayoutKV{});   // (N, D, S)
  Tensor sV = make_tensor(make_smem_ptr(smem_v), typename Traits::SmemLayoutKV{});   // (N, D, S)
  Tensor sVt = make_tensor(make_smem_ptr(smem_v), typename Traits::SmemLayoutVt{});  // (D, N, S)

  // ---- Q: packed row r = i * group + h is query i of query head kv_head * group + h -------------
  const Element* q = static_cast<const Element*>(p.q);
  for (int idx = tid; idx < kM * D / 8; idx += Traits::kThreads) {
    const int r = idx / (D / 8), c = idx % (D / 8) * 8;
    const bool valid = r < rows_here;
    const int row = valid ? row0 + r : row0;
    const int i = row / p.group, hq = kv_head * p.group + row % p.group;
    const Element* src = q + b * p.q_batch_stride + i * p.q_token_stride + hq * p.q_head_stride + c;
    SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>::copy(*reinterpret_cast<const uint128_t*>(src),
                                                     *reinterpret_cast<uint128_t*>(&sQ(r, c)), valid);
  }
  cp_async_fence();

  // ---- Which keys this block reads ---------------------------------------------------------------
  int len = p.seq_lens[b];
  bool bad_input = len < 0 || len > p.kv_capacity;  // reported as NaN below, never read past
  if (bad_input) len = 0;
  const int chunk = split_chunk_keys(len, p.num_splits, p.split_tokens, Traits::kBlockKeys);
  const int lo = int(min(int64_t(len), int64_t(split) * chunk));
  int hi = min(len, lo + chunk);
  if (p.causal) hi = min(hi, len - p.q_len + (row0 + rows_here - 1) / p.group + 1);
  const int n_subtiles = hi > lo ? (hi - lo + kN - 1) / kN : 0;
  const int my_subtiles = n_subtiles > warp ? (n_subtiles - warp + kWarps - 1) / kWarps : 0;

  // ---- This warp's K/V sub-tile copies --------------------------------------------------------------
  typename Traits::GmemWarpCopy gmem_copy;
  auto gmem_thr_copy = gmem_copy.get_thread_slice(lane);
  Tensor tKsK = gmem_thr_copy.partition_D(sK);  // (CPY, CPY_N, CPY_D, S)
  Tensor tVsV = gmem_thr_copy.partition_D(sV);
  Tensor tKVcKV = gmem_thr_copy.partition_S(make_identity_tensor(Shape<Int<kN>, Int<D>>{}));  // -> (key, col)
  const Element* k_head = static_cast<const Element*>(p.k) + kv_head * p.k_head_stride;
  const Element* v_head = static_cast<const Element*>(p.v) + kv_head * p.v_head_stride;
  const bool paged = p.block_table != nullptr;
  const int32_t* table_row = paged ? p.block_table + b * p.block_table_batch_stride : nullptr;
  PageIdCache page_ids;

  auto subtile_start = [&](int n) { return lo + (warp + n * kWarps) * kN; };
  auto issue_subtile = [&](int n, int stage) {
    const int t0 = subtile_start(n);
    int64_t page = b, slot = t0;
    bool page_ok = true;
    if (paged) {  // a 16-key sub-tile never straddles pages: page_size % 16 == 0, t0 % 16 == 0
      page = page_ids.get(n, lane, [&](int m) {
        const int t = subtile_start(m);
        return t < hi ? table_row[t / p.page_size] : 0;
      });
      slot = t0 % p.page_size;
      page_ok = page >= 0 && page < p.num_pages;
      bad_input |= !page_ok;
      if (!page_ok) page = 0;
    }
    Tensor gK = make_tensor(make_gmem_ptr(k_head + page * p.k_page_stride + slot * p.k_token_stride),
                            Shape<Int<kN>, Int<D>>{}, make_stride(p.k_token_stride, _1{}));
    Tensor gV = make_tensor(make_gmem_ptr(v_head + page * p.v_page_stride + slot * p.v_token_stride),
                            Shape<Int<kN>, Int<D>>{}, make_stride(p.v_token_stride, _1{}));
    Tensor tKgK = gmem_thr_copy.partition_S(gK);  // (CPY, CPY_N, CPY_D)
    Tensor tVgV = gmem_thr_copy.partition_S(gV);
    CUTE_UNROLL
    for (int m = 0; m < size<1>(tKgK); ++m) {
      const bool in_range = page_ok && t0 + get<0>(tKVcKV(0, m, 0)) < hi;  // else zero-fill
      copy(gmem_copy.with(in_range), tKgK(_, m, _), tKsK(_, m, _, stage));
      copy(gmem_copy.with(in_range), tVgV(_, m, _), tVsV(_, m, _, stage));
    }
  };

  CUTE_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < my_subtiles) issue_subtile(s, s);
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
  Tensor tSsQ = smem_thr_copy_q.partition_S(sQ);
  Tensor tSrQ_view = smem_thr_copy_q.retile_D(tSrQ);
  copy(smem_copy_q, tSsQ, tSrQ_view);

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
  OnlineSoftmax<2> softmax;
  softmax.reset();

  // (row, key) coordinates of this thread's score elements, and each row's visible-key end.
  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), acc_as_rows_cols(tScS.layout()));
  int row_end[2];
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = min(row0 + get<0>(tScS_rc(r, 0)), p.rows_per_kv - 1);
    row_end[r] = p.causal ? min(hi, len - p.q_len + row / p.group + 1) : hi;
  }
  const int min_row_end = min(row_end[0], row_end[1]);

  // ---- Main loop over this warp's sub-tiles --------------------------------------------------------
  for (int n = 0; n < my_subtiles; ++n) {
    cp_async_wait<kStages - 2>();
    __syncwarp();  // sub-tile n visible to all lanes; all lanes are done with sub-tile n - 1
    if (n + kStages - 1 < my_subtiles) issue_subtile(n + kStages - 1, (n + kStages - 1) % kStages);
    cp_async_fence();
    const int stage = n % kStages;
    const int t0 = subtile_start(n);

    Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
    clear(acc_s);
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tSrK); ++k) {
      copy(smem_copy_k, tSsK(_, _, k, stage), tSrK_view(_, _, k));
      gemm(tiled_mma, tSrQ(_, _, k), tSrK(_, _, k), acc_s);
    }
    Tensor scores = make_tensor(acc_s.data(), acc_as_rows_cols(acc_s.layout()));  // (2, 4)
    if (t0 + kN > min_row_end) {  // only sub-tiles that cross some row's last visible key
      CUTE_UNROLL
      for (int r = 0; r < size<0>(scores); ++r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(scores); ++c) {
          if (t0 + get<1>(tScS_rc(r, c)) >= row_end[r]) scores(r, c) = kNegInf;
        }
      }
    }
    softmax.update(scores, acc_o_rc, p.scale_log2);

    Tensor probs = convert_fragment<Element>(acc_s);
    Tensor tOrP = make_tensor(probs.data(), acc_as_a_operand(probs.layout()));  // A operand of P * V
    copy(smem_copy_v, tOsVt(_, _, _, stage), tOrVt_view);
    gemm(tiled_mma, tOrP, tOrVt, acc_o);
  }
  cp_async_wait<0>();
  softmax.reduce_sums();

  // ---- Merge the warps' states (fixed order: deterministic) ----------------------------------------
  __syncthreads();  // every warp is done with its ring: the merge buffers overlay it
  float* merge_o = reinterpret_cast<float*>(smem_kv);  // [warps][M][D]
  float* merge_max = merge_o + kWarps * kM * D;        // [warps][M]
  float* merge_sum = merge_max + kWarps * kM;          // [warps][M]
  float* cluster_o = merge_sum + kWarps * kM;          // [M][D]: this block's partial for the cluster
  float* cluster_lse = cluster_o + kM * D;             // [M]
  Tensor sO = make_tensor(make_smem_ptr(merge_o + warp * kM * D),
                          make_layout(Shape<Int<kM>, Int<D>>{}, LayoutRight{}));  // (M, D) fp32
  Tensor tOsO = thr_mma.partition_C(sO);
  copy(acc_o, tOsO);
  if (lane % 4 == 0) {
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int row = get<0>(tScS_rc(r, 0));
      merge_max[warp * kM + row] = softmax.row_max[r];
      merge_sum[warp * kM + row] = softmax.row_sum[r];
    }
  }
  if (bad_input) block_saw_bad_input = 1;
  __syncthreads();

  const bool poisoned = block_saw_bad_input != 0;
  constexpr int kVec = 4;
  for (int idx = tid; idx < kM * D / kVec; idx += Traits::kThreads) {
    const int r = idx / (D / kVec), c = idx % (D / kVec) * kVec;
    if (r >= rows_here) continue;
    float row_max = kNegInf;
    CUTE_UNROLL
    for (int w = 0; w < kWarps; ++w) row_max = fmaxf(row_max, merge_max[w * kM + r]);
    float row_sum = 0.f, o[kVec] = {};
    if (row_max != kNegInf) {
      CUTE_UNROLL
      for (int w = 0; w < kWarps; ++w) {
        const float factor = exp2f((merge_max[w * kM + r] - row_max) * p.scale_log2);
        row_sum += factor * merge_sum[w * kM + r];
        CUTE_UNROLL
        for (int j = 0; j < kVec; ++j) o[j] += factor * merge_o[(w * kM + r) * D + c + j];
      }
    }
    float lse = kNegInf;
    if (row_sum > 0.f) {
      const float inv = 1.f / row_sum;
      CUTE_UNROLL
      for (int j = 0; j < kVec; ++j) o[j] *= inv;
      lse = (row_max * p.scale_log2 + log2f(row_sum)) * kLn2;
    }
    if (poisoned) {
      lse = __int_as_float(0x7fc00000);
      CUTE_UNROLL
      for (int j = 0; j < kVec; ++j) o[j] = lse;
    }
    const int row = row0 + r;
    if (p.num_splits == 1) {
      store_output_row<Element>(p, b, kv_head, row, c, o, lse);
    } else if (p.cluster_combine) {
      *reinterpret_cast<float4*>(cluster_o + r * D + c) = make_float4(o[0], o[1], o[2], o[3]);
      if (c == 0) cluster_lse[r] = lse;
    } else {
      const int i = row / p.group, hq = kv_head * p.group + row % p.group;
      const int64_t partial_row =
          int64_t(split) * p.partial_rows + (int64_t(b) * p.q_len + i) * p.num_q_heads + hq;
      *reinterpret_cast<float4*>(p.partial_o + partial_row * D + c) = make_float4(o[0], o[1], o[2], o[3]);
      if (c == 0) p.partial_lse[partial_row] = lse;
    }
  }
  if (p.cluster_combine) {
    combine_across_cluster<Element, D, Traits::kThreads>(p, cluster_o, cluster_lse, b, kv_head, row0, rows_here);
  }
}

}  // namespace splitkv::detail
