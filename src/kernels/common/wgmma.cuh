// Warpgroup MMA (sm_90a wgmma) helpers: issuing a whole tile product, and views of the fp32
// accumulator fragment as (rows, cols) and as the 16-bit A operand of the next product.
#pragma once

#include <cute/tensor.hpp>

namespace splitkv::detail {

// tC (+)= tA * tB over every k-block, issued as one wgmma batch of the calling warpgroup and
// waited for. kZeroInit overwrites tC instead of accumulating. A may live in registers (RS).
template <bool kZeroInit, class TiledMma, class TensorA, class TensorB, class TensorC>
__device__ __forceinline__ void warpgroup_gemm(TiledMma& mma, const TensorA& tA, const TensorB& tB, TensorC& tC) {
  using namespace cute;
  // SS products pass A as shared-memory descriptors; RS products as registers.
  constexpr bool kARegisters = !is_base_of<GMMA::DescriptorIterator, typename TensorA::engine_type::iterator>::value;
  if constexpr (kARegisters) warpgroup_fence_operand(const_cast<TensorA&>(tA));
  warpgroup_fence_operand(tC);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tA); ++k) {
    cute::gemm(mma, tA(_, _, k), tB(_, _, k), tC);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_wait<0>();
  warpgroup_fence_operand(tC);
  if constexpr (kARegisters) warpgroup_fence_operand(const_cast<TensorA&>(tA));
}

// A wgmma accumulator fragment ((2 cols, 2 rows, N/8), MMA_M, MMA_N) viewed as
// (rows, cols) = ((2, MMA_M), (2, N/8, MMA_N)). The four threads of a quad share each row, as in
// the sm80 m16n8 fragment, so the same quad reductions apply.
template <class Layout>
__device__ __forceinline__ auto wgmma_acc_as_rows_cols(Layout acc) {
  using namespace cute;
  static_assert(decltype(rank<0>(acc))::value == 3);
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)), make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
}

// The accumulator of a 64 x N product reused as the 16-bit A operand of a 64 x D x N product:
// a k16 A fragment holds (2 cols, 2 rows, 2 col-chunks of 8), i.e. two adjacent n8 chunks of C.
// ((2, 2, N/8), MMA_M, MMA_N) -> ((2, 2, 2), MMA_M, N/16 * MMA_N).
template <class Layout>
__device__ __forceinline__ auto wgmma_acc_as_a_operand(Layout acc) {
  using namespace cute;
  auto chunk_pairs = logical_divide(get<0, 2>(acc), Tile<_2>{});  // ((2, N/16))
  return make_layout(make_layout(get<0, 0>(acc), get<0, 1>(acc), get<0, 0>(chunk_pairs)), get<1>(acc),
                     coalesce(make_layout(get<0, 1>(chunk_pairs), get<2>(acc))));
}

}  // namespace splitkv::detail
