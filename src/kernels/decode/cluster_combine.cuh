// Opt-in on sm_90: the splits of one (sequence, KV head, query tile) are the blocks of one
// thread-block cluster, merged without a workspace or a second kernel. Rank k owns the 4-column
// chunks k, k + ranks, ... of every row. Every rank pushes its partial of each chunk (O
// normalized) and its rows' LSEs into the owning rank's inbox with remote shared-memory stores, one
// cluster barrier makes them visible, and each owner merges its chunks from its own shared memory
// in rank order (deterministic: the bits of the combine kernel) and writes the final rows.
//
// Why push rather than pull: a remote load waits for its answer from the other SM; remote stores
// are fire-and-forget, and the barrier's release/acquire is the only wait. Pulling (each owner
// reading every rank's partial across the cluster between two full cluster barriers) measured
// a large share of a short row's call (docs/TUNING.md, "Kernels").
//
// The inbox overlays the K/V rings, so nobody may push into a rank whose ring is still in use: each
// thread arrives on the cluster barrier once its block is done with the ring (hand_inbox_to_cluster,
// after the block barrier that retires the ring's last copies), and a block waits on that phase
// right before its first push, after its own warp merge.
#pragma once

#include <cooperative_groups.h>

#include <cute/arch/cluster_sm90.hpp>

#include "kernels/common/combine_state.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/decode/decode_params.hpp"
#include "kernels/decode/decode_tile.hpp"

namespace splitkv::detail {

// A rank's inbox (tiles::cluster_inbox_bytes of shared memory): owner k keeps chunk k + s * ranks
// of row r from rank j at o[(s * kM + r) * ranks + j], and row r's LSE from rank j at lse[j * kM + r].
template <int kM, int kHeadDim>
struct ClusterInbox {
  static constexpr int kChunks = kHeadDim / 4;
  static_assert(kChunks >= tiles::kMaxClusterRanks, "a row's LSE goes to rank q from the thread of chunk q");
  float4* o;
  float* lse;
  __device__ __forceinline__ explicit ClusterInbox(char* base) {
    o = reinterpret_cast<float4*>(base);
    lse = reinterpret_cast<float*>(base + kM * (kChunks + tiles::kMaxClusterRanks - 1) * 16);
  }
};

// Called by every thread after the block barrier that retires the ring (a cluster plan only): the
// block clears its inbox with plain stores, then arrives (release) on the cluster barrier. The
// stores are not needed by the merge (every rank pushes every slot it reads); they make the
// inbox's last local writer an ordinary store, which a race checker orders against the pushes
// through the cluster barrier. The ring's async copies, completed by cp.async.wait_group and a
// block barrier, it does not (compute-sanitizer racecheck flagged them).
template <int kM, int kHeadDim, int kThreads>
__device__ __forceinline__ void hand_inbox_to_cluster(const DecodeParams& p, char* inbox) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (!p.cluster_combine) return;
  constexpr int kVectors = tiles::cluster_inbox_bytes(kM, kHeadDim) / 16;
  static_assert(tiles::cluster_inbox_bytes(kM, kHeadDim) % 16 == 0);
  for (int i = threadIdx.x; i < kVectors; i += kThreads) reinterpret_cast<float4*>(inbox)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  cute::cluster_arrive();  // release: the ring and the inbox are free for the other ranks' pushes
#endif
}

// Before the first push (every thread of the block): every rank's ring is free.
__device__ __forceinline__ void wait_until_rings_done_in_cluster() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cute::cluster_wait();
#endif
}

// Pushes this rank's partial of row r, chunk `chunk` (and, from the thread of chunk q < ranks, the
// row's LSE to rank q) into the owner's inbox.
template <int kM, int kHeadDim>
__device__ __forceinline__ void push_to_owner(const DecodeParams& p, const ClusterInbox<kM, kHeadDim>& inbox, int r,
                                              int chunk, const float4& o, float lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int ranks = p.num_splits.divisor, me = int(cluster.block_rank());
  const int slot = p.num_splits.div(chunk), owner = chunk - slot * ranks;
  cluster.map_shared_rank(inbox.o, owner)[(slot * kM + r) * ranks + me] = o;
  if (chunk < ranks) cluster.map_shared_rank(inbox.lse, chunk)[me * kM + r] = lse;
#endif
}

// After every thread's pushes: makes them visible, then merges this rank's chunks of rows
// [0, rows_here) from its inbox and writes the final rows. kSinks (a variants instance): the merged
// rows fold p.sinks, when set (fold_sink), as the combine kernel does.
template <class Element, int kM, int kHeadDim, int kThreads, bool kSinks = false>
__device__ __forceinline__ void merge_cluster_inbox(const DecodeParams& p, const ClusterInbox<kM, kHeadDim>& inbox,
                                                    int b, int kv_head, int row0, int rows_here) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cute::cluster_arrive();  // release: our pushes
  cute::cluster_wait();    // acquire: every rank's pushes into this inbox
  constexpr int kChunks = ClusterInbox<kM, kHeadDim>::kChunks;
  const int ranks = p.num_splits.divisor, me = int(cooperative_groups::this_cluster().block_rank());
  const int my_chunks = (kChunks - me + ranks - 1) / ranks;
  for (int item = threadIdx.x; item < rows_here * my_chunks; item += kThreads) {
    const int r = item / my_chunks, slot = item % my_chunks, chunk = me + slot * ranks;
    const float4* from = inbox.o + (slot * kM + r) * ranks;
    bool nan_seen = false;
    float out[4];
    float lse = merge_partials_in_order(
        ranks,
        [&](int k, float& lse_k, float4& o_k) {
          lse_k = inbox.lse[k * kM + r];
          o_k = from[k];
        },
        out, nan_seen);
    const PackedRow at = packed_row(p, kv_head, row0 + r);
    if constexpr (kSinks) {
      if (p.sinks != nullptr) {
        const float weight = fold_sink(p.sinks[at.head * p.sinks_stride], &lse);
#pragma unroll
        for (int j = 0; j < 4; ++j) out[j] *= weight;
      }
    }
    const OutputRow where{b, at.query, at.query, at.head, 0};
    write_output<Element, kHeadDim>(p.output, where, chunk * 4, out, lse, chunk == 0, nan_seen);
  }
#endif
}

}  // namespace splitkv::detail
