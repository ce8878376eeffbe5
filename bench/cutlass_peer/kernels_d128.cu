// The example's D=128 forward kernels (its run_fwd_128 without FP8: cooperative and ping-pong
// 128x128), bf16.
#include "example_fmha.cuh"

namespace splitkv::cutlass_peer {

PeerKernels kernels_d128_bf16(bool causal) {
  using cute::_128;
  using Element = cutlass::bfloat16_t;
  PeerKernels out;
  add_kernel<Element, cute::Shape<_128, _128, _128>, cutlass::gemm::KernelTmaWarpSpecializedCooperative>(
      out, causal, "ws cooperative 128x128");
  add_kernel<Element, cute::Shape<_128, _128, _128>, cutlass::gemm::KernelTmaWarpSpecializedPingpong>(
      out, causal, "ws ping-pong 128x128");
  return out;
}

}  // namespace splitkv::cutlass_peer
