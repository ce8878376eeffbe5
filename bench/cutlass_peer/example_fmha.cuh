// Adapter from one CUTLASS example FMHA kernel (FmhaBuilder + device::Universal, from
// examples/88_hopper_fmha) to PeerKernel. Included by the per-head-dim translation units only.
#pragma once

#include <utility>

#include "collective/fmha_fusion.hpp"
#include "cute/tensor.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "device/device_universal.hpp"
#include "kernel/fmha_kernel_builder.hpp"
#include "peer_kernel.hpp"

namespace splitkv::cutlass_peer {

template <class Element, class TileShape, class Schedule, class Fusion>
class ExampleFmha final : public PeerKernel {
  // [B, H, L, D] row-major seen as the example's (L, D, (B, H)) with unit stride along D.
  using StrideQKVO = cute::tuple<int, cute::_1, cute::tuple<int, int>>;
  using StrideLSE = cute::tuple<cute::_1, cute::tuple<int, int>>;
  using Kernel = typename cutlass::fmha::kernel::FmhaBuilder<Element, float, float, TileShape, StrideQKVO, StrideQKVO,
                                                             StrideQKVO, Fusion, Schedule>::Kernel;
  using Operation = cutlass::device::Universal<Kernel>;

 public:
  explicit ExampleFmha(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }

  bool initialize(const PeerProblem& p, const std::vector<PeerBuffers>& sets) override {
    using cute::make_stride;
    const auto problem = cute::make_tuple(p.batch, p.heads, p.q_len, p.k_len, p.head_dim);
    const StrideQKVO stride_q = make_stride(p.head_dim, cute::_1{}, make_stride(p.heads * p.q_len * p.head_dim,
                                                                                 p.q_len * p.head_dim));
    const StrideQKVO stride_kv = make_stride(p.head_dim, cute::_1{}, make_stride(p.heads * p.k_len * p.head_dim,
                                                                                  p.k_len * p.head_dim));
    const StrideLSE stride_lse = make_stride(cute::_1{}, make_stride(p.heads * p.q_len, p.q_len));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
    params_.clear();
    for (const PeerBuffers& b : sets) {
      typename Operation::Arguments args{problem,
                                         {static_cast<const Element*>(b.q), stride_q,
                                          static_cast<const Element*>(b.k), stride_kv,
                                          static_cast<const Element*>(b.v), stride_kv},
                                         {static_cast<Element*>(b.o), stride_q, b.lse, stride_lse},
                                         hw};
      if (Operation::can_implement(args) != cutlass::Status::kSuccess) return false;
      // The first initialize sets the kernel's shared-memory attribute; every set keeps its own
      // params (the pointers), launched through the static run().
      if (params_.empty() && operation_.initialize(args) != cutlass::Status::kSuccess) return false;
      params_.push_back(Kernel::to_underlying_arguments(args, nullptr));
    }
    return true;
  }

  bool enqueue(int set, cudaStream_t stream) override {
    return Operation::run(params_[set], stream) == cutlass::Status::kSuccess;
  }

 private:
  std::string name_;
  Operation operation_;
  std::vector<typename Operation::Params> params_;
};

// Appends the example kernel (Element, TileShape, Schedule) for the requested mask.
template <class Element, class TileShape, class Schedule>
void add_kernel(PeerKernels& out, bool causal, const char* name) {
  if (causal) {
    out.push_back(std::make_unique<ExampleFmha<Element, TileShape, Schedule, cutlass::fmha::collective::CausalFusion>>(name));
  } else {
    out.push_back(std::make_unique<ExampleFmha<Element, TileShape, Schedule, cutlass::fmha::collective::DefaultFusion>>(name));
  }
}

}  // namespace splitkv::cutlass_peer
