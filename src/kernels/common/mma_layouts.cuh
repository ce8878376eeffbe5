// Views of sm80 MMA fragments (m16n8k16) used by the softmax and by the P*V product.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

namespace splitkv::detail {

// An accumulator fragment ((2 cols, 2 rows), MMA_M, MMA_N) viewed as (rows, cols):
// ((2, MMA_M), (2, MMA_N)). Each thread then owns 2*MMA_M rows of 2*MMA_N columns.
template <class Layout>
__device__ __forceinline__ auto acc_as_rows_cols(Layout acc) {
  static_assert(decltype(cute::rank(acc))::value == 3);
  auto split = cute::logical_divide(acc, cute::Shape<cute::_2>{});  // ((2, 2), MMA_M, MMA_N)
  return cute::make_layout(cute::make_layout(cute::get<0, 1>(split), cute::get<1>(split)),
                           cute::make_layout(cute::get<0, 0>(split), cute::get<2>(split)));
}

// An accumulator fragment (4, MMA_M, MMA_N) reused as the A operand of the next MMA:
// ((4, 2), MMA_M, MMA_N / 2). The m16n8 C fragments of two adjacent n-tiles are exactly the
// m16k16 A fragment of one k-step, so P never leaves registers.
template <class Layout>
__device__ __forceinline__ auto acc_as_a_operand(Layout acc) {
  static_assert(decltype(cute::size<2>(acc))::value % 2 == 0);
  auto split = cute::logical_divide(acc, cute::Shape<cute::Underscore, cute::Underscore, cute::_2>{});
  return cute::make_layout(cute::make_layout(cute::get<0>(split), cute::get<2, 0>(split)),
                           cute::get<1>(split), cute::get<2, 1>(split));
}

// Element-wise conversion of a register fragment (fp32 accumulators to fp16/bf16 operands).
template <class To, class Engine, class Layout>
__device__ __forceinline__ auto convert_fragment(cute::Tensor<Engine, Layout> const& src) {
  using From = typename Engine::value_type;
  constexpr int N = decltype(cute::size(src))::value;
  cutlass::NumericArrayConverter<To, From, N> convert;
  auto dst = cute::make_tensor<To>(src.layout());
  *reinterpret_cast<cutlass::Array<To, N>*>(dst.data()) =
      convert(*reinterpret_cast<const cutlass::Array<From, N>*>(src.data()));
  return dst;
}

// The same conversion into an existing fragment of the same size (whole 32-bit words, no 16-bit
// moves), for an operand that must keep its registers across loop steps.
template <class From, class Layout, class ToTensor>
__device__ __forceinline__ void convert_fragment_into(cute::Tensor<cute::ArrayEngine<From, cute::size_v<Layout>>, Layout> const& src, ToTensor& dst) {
  using To = typename ToTensor::value_type;
  constexpr int N = cute::size_v<Layout>;
  static_assert(decltype(cute::size(dst))::value == N);
  cutlass::NumericArrayConverter<To, From, N> convert;
  *reinterpret_cast<cutlass::Array<To, N>*>(dst.data()) = convert(*reinterpret_cast<const cutlass::Array<From, N>*>(src.data()));
}

}  // namespace splitkv::detail
