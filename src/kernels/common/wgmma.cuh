// Warpgroup MMA (sm_90a wgmma) helpers: issuing a whole tile product, and views of the fp32
// accumulator fragment as (rows, cols) and as the 16-bit A operand of the next product.
#pragma once

#include <cute/tensor.hpp>

namespace splitkv::detail {

// Whether A comes from registers (RS) rather than shared-memory descriptors (SS).
template <class TensorA>
constexpr bool kAFromRegisters =
    !cute::is_base_of<cute::GMMA::DescriptorIterator, typename TensorA::engine_type::iterator>::value;

// Issues tC (+)= tA * tB over every k-block as one wgmma batch of the calling warpgroup, without
// waiting: the registers of tC (and of tA for RS) belong to the tensor cores until a
// warpgroup_wait that retires the batch, followed by fence_wgmma_operands. kZeroInit overwrites tC.
template <bool kZeroInit, class TiledMma, class TensorA, class TensorB, class TensorC>
__device__ __forceinline__ void warpgroup_gemm_issue(TiledMma& mma, const TensorA& tA, const TensorB& tB, TensorC& tC) {
  using namespace cute;
  if constexpr (kAFromRegisters<TensorA>) warpgroup_fence_operand(const_cast<TensorA&>(tA));
  warpgroup_fence_operand(tC);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tA); ++k) {
    cute::gemm(mma, tA(_, _, k), tB(_, _, k), tC);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

// The same batch where B's k-blocks arrive in kSlices ring stages: k-blocks [s kb, (s + 1) kb) of tA
// meet tB(_, _, _, stages[s]), tB being (MMA, MMA_N, kb, ring stages). With one slice it is
// warpgroup_gemm_issue(mma, tA, tB(_, _, _, stages[0]), tC).
template <bool kZeroInit, int kSlices, class TiledMma, class TensorA, class TensorB, class TensorC>
__device__ __forceinline__ void warpgroup_gemm_issue_slices(TiledMma& mma, const TensorA& tA, const TensorB& tB,
                                                            const int (&stages)[kSlices], TensorC& tC) {
  using namespace cute;
  constexpr int kBlocksPerSlice = decltype(size<2>(tB))::value;
  static_assert(decltype(size<2>(tA))::value == kSlices * kBlocksPerSlice, "A's k-blocks are the slices' k-blocks");
  if constexpr (kAFromRegisters<TensorA>) warpgroup_fence_operand(const_cast<TensorA&>(tA));
  warpgroup_fence_operand(tC);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int s = 0; s < kSlices; ++s) {
    CUTE_UNROLL
    for (int k = 0; k < kBlocksPerSlice; ++k) {
      cute::gemm(mma, tA(_, _, s * kBlocksPerSlice + k), tB(_, _, k, stages[s]), tC);
      mma.accumulate_ = GMMA::ScaleOut::One;
    }
  }
  warpgroup_commit_batch();
}

// After a warpgroup_wait: the compiler may touch these registers again (and not earlier).
template <class... Tensors>
__device__ __forceinline__ void fence_wgmma_operands(Tensors&... tensors) {
  (cute::warpgroup_fence_operand(tensors), ...);
}

// ptxas schedules a warpgroup_wait at the top of its basic block, ahead of arithmetic that the
// source puts before it and that does not depend on it (docs/TUNING.md, "Kernels"). A
// shared-memory store of a value that depends on that arithmetic keeps it there: ptxas does not
// move the wait above a store. `sink` is a scratch word of the calling thread's own (one word per
// thread, so the stores never race); its value is unused.
__device__ __forceinline__ void keep_before_next_wait(float value, float* sink) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(sink))), "f"(value)
               : "memory");
}

// tC (+)= tA * tB, issued and waited for.
template <bool kZeroInit, class TiledMma, class TensorA, class TensorB, class TensorC>
__device__ __forceinline__ void warpgroup_gemm(TiledMma& mma, const TensorA& tA, const TensorB& tB, TensorC& tC) {
  warpgroup_gemm_issue<kZeroInit>(mma, tA, tB, tC);
  cute::warpgroup_wait<0>();
  fence_wgmma_operands(tC);
  if constexpr (kAFromRegisters<TensorA>) fence_wgmma_operands(const_cast<TensorA&>(tA));
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
