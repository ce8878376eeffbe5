// The example's D=64 forward kernels (its run_fwd_64: the plain TMA 64x128 kernel, the
// warp-specialized cooperative and ping-pong 128x64 kernels), fp16.
#include "example_fmha.cuh"

namespace splitkv::cutlass_peer {

PeerKernels kernels_d64_fp16(bool causal) {
  using cute::_128;
  using cute::_64;
  using Element = cutlass::half_t;
  PeerKernels out;
  add_kernel<Element, cute::Shape<_64, _128, _64>, cutlass::gemm::KernelTma>(out, causal, "tma 64x128");
  add_kernel<Element, cute::Shape<_128, _64, _64>, cutlass::gemm::KernelTmaWarpSpecializedCooperative>(
      out, causal, "ws cooperative 128x64");
  add_kernel<Element, cute::Shape<_128, _64, _64>, cutlass::gemm::KernelTmaWarpSpecializedPingpong>(
      out, causal, "ws ping-pong 128x64");
  return out;
}

}  // namespace splitkv::cutlass_peer
