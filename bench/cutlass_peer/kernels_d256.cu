// The example's D=256 forward kernel (its run_fwd_256 without FP8: cooperative 128x64), bf16.
#include "example_fmha.cuh"

namespace splitkv::cutlass_peer {

PeerKernels kernels_d256_bf16(bool causal) {
  using cute::_128;
  using cute::_256;
  using cute::_64;
  PeerKernels out;
  add_kernel<cutlass::bfloat16_t, cute::Shape<_128, _64, _256>, cutlass::gemm::KernelTmaWarpSpecializedCooperative>(
      out, causal, "ws cooperative 128x64");
  return out;
}

}  // namespace splitkv::cutlass_peer
