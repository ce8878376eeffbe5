// Opt-in on sm_90: the splits of one (sequence, KV head, query tile) are the blocks of one
// thread-block cluster. Each left its partial (O normalized, LSE) for rows [0, rows_here) in its
// own shared memory; rank k merges the 4-column chunks k, k + ranks, ... of every row, reading all
// ranks' partials through distributed shared memory in rank order (deterministic), and writes the
// final rows. No workspace, no second kernel.
#pragma once

#include <cooperative_groups.h>

#include "kernels/common/combine_state.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/decode/decode_params.hpp"

namespace splitkv::detail {

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
    const float lse = state.finish(out);
    const PackedRow at = packed_row(p, kv_head, row0 + r);
    const OutputRow where{b, at.query, at.query, at.head, 0};
    write_output<Element, kHeadDim>(p.output, where, chunk * 4, out, lse, chunk == 0, nan_seen);
  }
  cluster.sync();  // our shared memory stays alive until every rank has read it
#endif
}

}  // namespace splitkv::detail
