// The CUTLASS Hopper FMHA example (examples/88_hopper_fmha in the CUTLASS package) as a peer of
// the prefill suite: the interface the driver times, free of CUTLASS types. One PeerKernel is one
// of the example's forward kernels (tile shape x kernel schedule) for one head dim and mask.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

namespace splitkv::cutlass_peer {

// B x H heads of Lq queries against Lk keys, no GQA (the example has none).
struct PeerProblem {
  int batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0;
  bool causal = false;  // the example's causal mask; on Lq == Lk rows it is ours (bottom-right)
};

// One input set: Q, K, V, O [B, H, L, D] contiguous (fp16 or bf16, as the kernel was built), LSE
// [B, H, Lq] fp32.
struct PeerBuffers {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
};

class PeerKernel {
 public:
  virtual ~PeerKernel() = default;
  virtual std::string name() const = 0;
  // Prepares one launch per input set; false when the kernel cannot take the problem.
  virtual bool initialize(const PeerProblem& problem, const std::vector<PeerBuffers>& sets) = 0;
  // Launches the kernel on input set `set` (graph-capturable); false on a launch error.
  virtual bool enqueue(int set, cudaStream_t stream) = 0;
};

using PeerKernels = std::vector<std::unique_ptr<PeerKernel>>;

// The example's forward kernels at each head dim, as its own driver runs them (fp16 at D=64, bf16
// at D=128 and D=256: the dtypes of the suite's rows), for the given mask.
PeerKernels kernels_d64_fp16(bool causal);
PeerKernels kernels_d128_bf16(bool causal);
PeerKernels kernels_d256_bf16(bool causal);

}  // namespace splitkv::cutlass_peer
