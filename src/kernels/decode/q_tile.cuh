// The decode block's Q tile: packed row r = i * group + h is query i of query head
// kv_head * group + h (GQA packing), copied into shared memory with cp.async; rows past the
// block's rows are zero-filled.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/decode/decode_params.hpp"

namespace splitkv::detail {

template <class Traits, class SmemQ>
__device__ __forceinline__ void load_q_tile(const DecodeParams& p, SmemQ& sQ, int b, int kv_head, int row0,
                                            int rows_here, int tid) {
  using Element = typename Traits::Element;
  constexpr int D = Traits::kHeadDim;
  const Element* q = static_cast<const Element*>(p.q);
  for (int idx = tid; idx < Traits::kBlockM * D / 8; idx += Traits::kThreads) {
    const int r = idx / (D / 8), c = idx % (D / 8) * 8;
    const bool valid = r < rows_here;
    const int row = valid ? row0 + r : row0;
    const PackedRow at = packed_row(p, kv_head, row);
    const Element* src = q + b * p.q_batch_stride + at.query * p.q_token_stride + at.head * p.q_head_stride + c;
    cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>::copy(*reinterpret_cast<const cute::uint128_t*>(src),
                                                                 *reinterpret_cast<cute::uint128_t*>(&sQ(r, c)), valid);
  }
}

}  // namespace splitkv::detail
