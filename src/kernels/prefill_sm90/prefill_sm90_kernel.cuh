// Prefill forward on sm_90a: TMA loads, wgmma, warp specialization.
//
// Grid (query block, query head, sequence x KV split), like the mma.sync family, so planning,
// split-KV and the combine are shared. Per block: warpgroup 0 is the producer (one elected thread
// issues the TMA loads: Q once, then K_t, V_t, K_t+1, ... through one ring of mbarrier-guarded
// stages, and gives its registers away); warpgroups 1 and 2 are consumers of 64 query rows each. Per K/V
// tile a consumer computes S = Q K^T (wgmma, both operands in shared memory), masks and folds S
// into its online softmax (fp32 statistics in registers), and accumulates O += P V (wgmma with P
// from registers, V read transposed through its descriptor). The two consumer warpgroups are
// independent, so one's softmax runs while the other's products occupy the tensor cores. Rows
// are written through the common epilogue (final O/LSE, split partials, or NaN for bad device
// data). (Overlapping the softmax with the products inside one warpgroup was tried and measured
// slower: bench/NOTES.md, run 9.)
//
// Keys past the sequence's end inside the last tile can hold anything (a varlen neighbour's
// padding, NaN): their scores are masked to -inf, and their V rows are zeroed in shared memory
// before P V, because 0 * NaN is NaN.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/arch/reg_reconfig.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/prefill_common.cuh"
#include "kernels/prefill_sm90/prefill_sm90_traits.cuh"
#include "kernels/prefill_sm90/tensor_core_turns.cuh"

namespace splitkv::detail {

template <class Traits>
struct PrefillSm90Params {
  PrefillParams p;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaKV tma_k;
  typename Traits::TmaKV tma_v;
  typename Traits::GmemShape shape_q;   // (tokens, D, Hq, batch slots)
  typename Traits::GmemShape shape_kv;  // (tokens, D, Hkv, batch slots)
};

// Named barrier of the consumer warpgroups, counted from the first id CUTLASS leaves free.
constexpr uint32_t kConsumersBarrier = 0;

// Zeroes rows [valid_rows, N) of a (N, D) shared-memory tile, 16 bytes per store, then makes the
// writes visible to wgmma and waits for the other consumers.
template <class Traits, class SmemTile>
__device__ __forceinline__ void zero_rows_from(SmemTile sV_stage, int valid_rows, int consumer_tid) {
  using Element = typename Traits::Element;
  constexpr int kChunks = Traits::kHeadDim / 8;  // 16-byte chunks per row: contiguous under the swizzle
  for (int idx = valid_rows * kChunks + consumer_tid; idx < Traits::kBlockN * kChunks; idx += Traits::kConsumerThreads) {
    *reinterpret_cast<cute::uint128_t*>(&sV_stage(idx / kChunks, idx % kChunks * 8)) = cute::uint128_t{0, 0};
  }
  cutlass::arch::fence_view_async_shared();
  cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, kConsumersBarrier);
  static_assert(sizeof(Element) == 2);
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    prefill_sm90_kernel(const __grid_constant__ PrefillSm90Params<Traits> params) {
  using namespace cute;
  using Element = typename Traits::Element;
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Traits::PipelineState;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int D = Traits::kHeadDim;
  constexpr int kM = Traits::kBlockM;
  constexpr int kN = Traits::kBlockN;
  const PrefillParams& p = params.p;

  extern __shared__ char smem_raw[];
  // 128-byte swizzled tiles need 1024-byte alignment.
  char* smem_base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_base);

  wait_for_prior_grids();
  allow_dependent_launch();
  PrefillBlock<Element> blk;
  if (!blk.init(p, kM, kN)) return;  // the whole block: no such rows in this sequence
  const PrefillSequence& seq = blk.seq;
  const KeyRange& keys = blk.keys;
  const int warpgroup = cutlass::canonical_warp_group_idx();

  typename Pipeline::Params pipeline_params;
  pipeline_params.transaction_bytes = Traits::kKVBytes;
  pipeline_params.role = warpgroup == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pipeline_params.is_leader = threadIdx.x == 0;
  pipeline_params.num_consumers = Traits::kConsumerThreads;
  Pipeline pipeline(smem.pipeline_kv, pipeline_params, Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) Barrier::init(&smem.barrier_q, 1);
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});    // (M, D)
  // The ring's stages hold K or V tiles; sK, sV and sVt are views of the same memory.
  Tensor sK = make_tensor(make_smem_ptr(smem.kv.data()), typename Traits::SmemLayoutKV{});   // (N, D, S)
  Tensor sV = sK;                                                                              // (N, D, S)
  Tensor sVt = make_tensor(make_smem_ptr(smem.kv.data()), typename Traits::SmemLayoutVt{});  // (D, N, S)
  const int first_kv_tile = keys.lo / kN;  // split chunks are whole tiles

  if (warpgroup == 0) {
    // ---- Producer: one thread issues every TMA load ---------------------------------------------
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    if (threadIdx.x / 32 == 0 && cute::elect_one_sync()) {
      const int batch_slot = p.cu_seqlens_q != nullptr ? 0 : blk.b;
      Tensor mQ = params.tma_q.get_tma_tensor(params.shape_q)(_, _, blk.hq, batch_slot);  // (tokens, D)
      Tensor mK = params.tma_k.get_tma_tensor(params.shape_kv)(_, _, blk.kv_head, batch_slot);
      Tensor mV = params.tma_v.get_tma_tensor(params.shape_kv)(_, _, blk.kv_head, batch_slot);
      Tensor gQ = local_tile(domain_offset(make_coord(int(seq.q_begin + blk.row0), _0{}), mQ), Shape<Int<kM>, Int<D>>{},
                             make_coord(_0{}, _0{}));  // (M, D)
      Tensor gK = local_tile(domain_offset(make_coord(int(seq.k_begin), _0{}), mK), Shape<Int<kN>, Int<D>>{},
                             make_coord(_, _0{}));  // (N, D, tiles)
      Tensor gV = local_tile(domain_offset(make_coord(int(seq.k_begin), _0{}), mV), Shape<Int<kN>, Int<D>>{},
                             make_coord(_, _0{}));  // (N, D, tiles)
      auto [tQgQ, tQsQ] = tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
      auto [tKgK, tKsK] = tma_partition(params.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
      auto [tVgV, tVsV] = tma_partition(params.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

      Barrier::arrive_and_expect_tx(&smem.barrier_q, Traits::kQBytes);
      copy(params.tma_q.with(smem.barrier_q, 0), tQgQ, tQsQ);
      PipelineState write = cutlass::make_producer_start_state<Pipeline>();
      for (int t = 0; t < blk.n_blocks; ++t) {
        pipeline.producer_acquire(write);
        copy(params.tma_k.with(*pipeline.producer_get_barrier(write), 0), tKgK(_, first_kv_tile + t),
             tKsK(_, write.index()));
        ++write;
        pipeline.producer_acquire(write);
        copy(params.tma_v.with(*pipeline.producer_get_barrier(write), 0), tVgV(_, first_kv_tile + t),
             tVsV(_, write.index()));
        ++write;
      }
      // Do not leave while loads are in flight: wait until the consumers released every stage.
      pipeline.producer_tail(write);
    }
    return;
  }

  // ---- Consumers: 64 query rows per warpgroup -----------------------------------------------------
  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
  const int consumer_tid = threadIdx.x - 128;
  typename Traits::TiledMmaQK mma_qk;
  auto thr_qk = mma_qk.get_thread_slice(consumer_tid);
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);  // (MMA, MMA_M, MMA_K) descriptors
  Tensor tSrK = thr_qk.partition_fragment_B(sK);  // (MMA, MMA_N, MMA_K, S)
  typename Traits::TiledMmaPV mma_pv;
  auto thr_pv = mma_pv.get_thread_slice(consumer_tid);
  Tensor tOrVt = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, S)

  Tensor acc_o = partition_fragment_C(mma_pv, Shape<Int<kM>, Int<D>>{});  // (MMA, MMA_M, MMA_N) fp32
  clear(acc_o);
  Tensor acc_o_rc = make_tensor(acc_o.data(), wgmma_acc_as_rows_cols(acc_o.layout()));  // (rows, cols)
  Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));    // -> (row, key)
  Tensor tScS_rc = make_tensor(tScS.data(), wgmma_acc_as_rows_cols(tScS.layout()));
  constexpr int kRows = decltype(size<0>(acc_o_rc))::value;
  OnlineSoftmax<kRows> softmax;
  softmax.reset();

  Barrier::wait(&smem.barrier_q, 0);
  if constexpr (Traits::kOverlapSoftmax) {
    // Tile t's product S_t = Q K_t^T is issued together with O += P_{t-1} V_{t-1}, and the softmax of
    // S_t runs while the second product is on the tensor cores (FlashAttention-3's intra-warpgroup
    // overlap); the turns order the two consumers' issues. Every wait sits right after an issue:
    // ptxas schedules a wait as early as its latency model allows, and a wait for P_{t-1} V_{t-1}
    // placed after the softmax landed before the exponentials (bench/NOTES.md, runs 9 and 17). So
    // P_{t-1} V_{t-1} retires only in step t + 1, after S_{t+1} is issued, and P is double-buffered:
    // P_t is written while the product still reads P_{t-1}. Masked tiles (the last ones) run a
    // separate copy of the step, so the overlapped stretch has no branch on the mask.
    Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kM>, Int<kN>>{});              // (MMA, MMA_M, MMA_N)
    Tensor scores = make_tensor(acc_s.data(), wgmma_acc_as_rows_cols(acc_s.layout()));  // (rows, keys)
    Tensor tOrP0 = make_tensor<Element>(wgmma_acc_as_a_operand(acc_s.layout()));  // P of even tiles (A of P V)
    Tensor tOrP1 = make_tensor<Element>(wgmma_acc_as_a_operand(acc_s.layout()));  // P of odd tiles
    float rescale[kRows];  // by how much O shrinks before P_{t-1} V_{t-1} is added
    const TensorCoreTurns turns{warpgroup - 1};
    PipelineState read_k;  // ring position 2t: K_t
    PipelineState read_v;  // ring position 2t - 1: V_{t-1}, the V of the product issued next
    PipelineState done_v;  // V_{t-2}: released once its product has retired
    auto next_tile = [](PipelineState& state) { ++state, ++state; };

    // S_t has retired: mask it (when `mask`) and fold it into the softmax; P_t goes to tOrP_t.
    auto fold_tile = [&](int t, auto mask, auto& tOrP_t) __attribute__((always_inline)) {
      if constexpr (decltype(mask)::value) mask_scores(scores, tScS_rc, p, seq, blk.row0, keys.lo + t * kN, keys.hi);
      softmax.fold(scores, p.scale_log2, rescale);
      copy(convert_fragment<Element>(acc_s), tOrP_t);
    };
    // Step t >= 1: issues S_t and P_{t-1} V_{t-1} (P_{t-1} in tOrP_prev), folds S_t into tOrP_t.
    auto step = [&](int t, auto mask, auto& tOrP_prev, auto& tOrP_t) __attribute__((always_inline)) {
      pipeline.consumer_wait(read_k);
      pipeline.consumer_wait(read_v);
      turns.wait_for_turn();
      warpgroup_gemm_issue<true>(mma_qk, tSrQ, tSrK(_, _, _, read_k.index()), acc_s);
      // P_{t-2} V_{t-2} and S_t. (Retiring only the first would let S_t run on, but ptxas then
      // serialises every product of the kernel because O is read while a product is in flight.)
      warpgroup_wait<0>();
      fence_wgmma_operands(acc_s, acc_o, tOrP_t);
      if (t > 1) pipeline.consumer_release(done_v);
      pipeline.consumer_release(read_k);
      softmax.rescale_rows(acc_o_rc, rescale);
      warpgroup_gemm_issue<false>(mma_pv, tOrP_prev, tOrVt(_, _, _, read_v.index()), acc_o);
      turns.pass_turn();
      fold_tile(t, mask, tOrP_t);
      done_v = read_v;
      next_tile(read_k);
      next_tile(read_v);
    };
    // Steps [t, end); P_{t-1} is in tOrP0 when t is odd. The loop body is two steps so that the
    // buffers alternate at compile time.
    auto steps = [&](int t, int end, auto mask) __attribute__((always_inline)) {
      if (t % 2 == 0 && t < end) step(t++, mask, tOrP1, tOrP0);
      for (; t + 1 < end; t += 2) {
        step(t, mask, tOrP0, tOrP1);
        step(t + 1, mask, tOrP1, tOrP0);
      }
      if (t < end) step(t++, mask, tOrP0, tOrP1);
      return t;
    };

    if (blk.n_blocks > 0) {
      pipeline.consumer_wait(read_k);
      turns.wait_for_first_turn();
      warpgroup_gemm_issue<true>(mma_qk, tSrQ, tSrK(_, _, _, read_k.index()), acc_s);
      turns.pass_turn();
      warpgroup_wait<0>();
      fence_wgmma_operands(acc_s);
      pipeline.consumer_release(read_k);
      fold_tile(0, cute::true_type{}, tOrP0);
      next_tile(read_k);
      ++read_v;

      // Tiles from first_masked on contain keys some row must not see (causal diagonal, range end).
      const int first_masked = max(1, max(0, keys.mask_from - keys.lo) / kN);
      const int t = steps(1, min(first_masked, blk.n_blocks), cute::false_type{});
      steps(t, blk.n_blocks, cute::true_type{});

      // The last P V. Its V rows past the sequence's end (a varlen neighbour, padding) are zeroed.
      const int last = blk.n_blocks - 1;
      pipeline.consumer_wait(read_v);
      const int n_last = keys.lo + last * kN;
      if (n_last + kN > seq.k_len) zero_rows_from<Traits>(sV(_, _, read_v.index()), seq.k_len - n_last, consumer_tid);
      turns.wait_for_turn();
      warpgroup_wait<0>();
      fence_wgmma_operands(acc_o, tOrP0, tOrP1);
      if (last > 0) pipeline.consumer_release(done_v);
      softmax.rescale_rows(acc_o_rc, rescale);
      if (last % 2 == 0) {
        warpgroup_gemm_issue<false>(mma_pv, tOrP0, tOrVt(_, _, _, read_v.index()), acc_o);
      } else {
        warpgroup_gemm_issue<false>(mma_pv, tOrP1, tOrVt(_, _, _, read_v.index()), acc_o);
      }
      turns.pass_last_turn();
      warpgroup_wait<0>();
      fence_wgmma_operands(acc_o, tOrP0, tOrP1);
      pipeline.consumer_release(read_v);
    }
  } else {
    // Where registers cannot hold S, two P buffers and O (D=256): S_t, softmax, P_t V_t in turn,
    // each product waited for (bench/NOTES.md, run 8).
    PipelineState read;
    for (int t = 0; t < blk.n_blocks; ++t) {
      const int n0 = keys.lo + t * kN;
      Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kM>, Int<kN>>{});  // (MMA, MMA_M, MMA_N)
      pipeline.consumer_wait(read);  // K_t
      warpgroup_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, read.index()), acc_s);
      pipeline.consumer_release(read);
      ++read;

      Tensor scores = make_tensor(acc_s.data(), wgmma_acc_as_rows_cols(acc_s.layout()));  // (rows, keys)
      if (n0 + kN > keys.mask_from) mask_scores(scores, tScS_rc, p, seq, blk.row0, n0, keys.hi);
      softmax.update(scores, acc_o_rc, p.scale_log2);
      Tensor probs = convert_fragment<Element>(acc_s);
      Tensor tOrP = make_tensor(probs.data(), wgmma_acc_as_a_operand(probs.layout()));  // A operand of P V

      pipeline.consumer_wait(read);  // V_t
      if (n0 + kN > seq.k_len) zero_rows_from<Traits>(sV(_, _, read.index()), seq.k_len - n0, consumer_tid);
      warpgroup_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, read.index()), acc_o);
      pipeline.consumer_release(read);
      ++read;
    }
  }

  // ---- Epilogue --------------------------------------------------------------------------------------
  softmax.reduce_sums();
  float lse[kRows], inv[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    lse[r] = softmax.lse(r, p.scale_log2);
    inv[r] = softmax.row_sum[r] > 0.f ? 1.f / softmax.row_sum[r] : 0.f;
  }
  Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<kM>, Int<D>>{}));  // -> (row, col)
  Tensor tOcO_rc = make_tensor(tOcO.data(), wgmma_acc_as_rows_cols(tOcO.layout()));
  RowWriter{p, seq, blk.b, blk.hq, blk.split, blk.row0}.write<Element, D>(acc_o_rc, tOcO_rc, lse, inv,
                                                                           consumer_tid % 4 == 0);
}

}  // namespace splitkv::detail
