// Shared pieces of the GPU tests: skipping without a GPU or without an instantiation, poisoned
// workspaces, one call captured in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "splitkv/splitkv.hpp"
#include "testing/decode_check.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::gpu_test {

inline bool compiled(DType dtype, int head_dim) {
  const std::vector<int> dims = compiled_head_dims();
  return dtype_compiled(dtype) && std::find(dims.begin(), dims.end(), head_dim) != dims.end();
}

// Whether family f has an instance at (dtype, D) serving kv_format: a 16-bit family's instances
// are keyed kNative, a quantized family's by format.
inline bool family_holds(const KernelFamilyInfo& f, DType dtype, int head_dim, KvFormat kv_format) {
  for (const KernelFamilyInfo::Compiled& c : f.compiled) {
    if (c.dtype == dtype && c.head_dim == head_dim && (c.kv_format == KvFormat::kNative || c.kv_format == kv_format)) {
      return true;
    }
  }
  return false;
}

// Whether this build holds the instance a plan runs (its family at the problem's dtype, head dim
// and KV format).
inline bool plan_compiled(const Plan& plan) {
  const bool decode = plan.kind() == Plan::Kind::kDecode;
  const DType dtype = decode ? plan.decode().dtype : plan.prefill().dtype;
  const int head_dim = decode ? plan.decode().head_dim : plan.prefill().head_dim;
  const KvFormat kv_format = decode ? plan.decode().kv_format : plan.prefill().kv_format;
  for (const KernelFamilyInfo& f : kernel_families()) {
    if (f.name == plan.family() && family_holds(f, dtype, head_dim, kv_format)) return true;
  }
  return false;
}

// Whether this build holds a 16-bit instance of some family of `kind` and `arch` at (dtype, D): the
// planner routes only to compiled families, so a test of its route skips without one.
inline bool kind_compiled(const std::string& kind, const std::string& arch, DType dtype, int head_dim) {
  for (const KernelFamilyInfo& f : kernel_families()) {
    if (f.kind == kind && f.arch == arch && family_holds(f, dtype, head_dim, KvFormat::kNative)) return true;
  }
  return false;
}

inline DeviceInfo device() {
  DeviceInfo info;
  EXPECT_TRUE(query_device(0, &info).ok());
  return info;
}

// A workspace of `bytes` filled with NaN (all bits set): a partial nothing wrote fails the test.
inline testing::DeviceBuffer poisoned_workspace(size_t bytes) {
  testing::DeviceBuffer b(bytes);
  b.fill_bytes(0xff);
  return b;
}

// Batch invariance (options.split_tokens): sequence 0 of `alone` is copied into sequence `b` of
// `batch`; each case is planned with `options` and run once (outputs and workspace poisoned); both
// runs must pass the fp64 reference and the sequence's output bits must agree. False when this
// build lacks the plan's family (the caller skips).
inline bool check_batch_invariant_bits(testing::DecodeCase alone, testing::DecodeCase batch, int b,
                                       const PlanOptions& options, const std::string& what) {
  testing::copy_sequence(alone, 0, batch, b);
  std::vector<uint16_t> bits[2];
  int i = 0;
  for (auto [c, seq] : {std::pair{&alone, 0}, std::pair{&batch, b}}) {
    Plan plan;
    const Status planned = plan_decode(c->problem, device(), options, &plan);
    EXPECT_TRUE(planned.ok()) << what << ": " << planned.message();
    if (!planned.ok()) return true;
    if (!plan_compiled(plan)) return false;
    testing::DeviceDecodeCase dev(*c);
    testing::DeviceBuffer workspace = poisoned_workspace(plan.workspace_bytes());
    const Status ran = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
    EXPECT_TRUE(ran.ok()) << what << ": " << ran.message();
    dev.download_outputs(*c);
    EXPECT_TRUE(testing::check_decode(*c).passed) << what << (seq == 0 ? " alone" : " in the batch");
    bits[i++] = testing::sequence_output_bits(*c, seq);
  }
  EXPECT_EQ(bits[0], bits[1]) << what;
  return true;
}

// Whether a prefill family ("": the planner's) serves a problem's shape: the mma.sync families stop
// at head dim 128; prefill_sm90_m192 is D=64 only, prefill_sm90_n80 D=256, prefill_sm90_v64 D=128;
// prefill_sm90_gqa packs at most 16 query heads per KV head, prefill_sm90_gqa64 (D=128) at most 8.
inline bool prefill_family_serves(const std::string& family, const PrefillProblem& p) {
  const int d = p.head_dim;
  const int group = p.num_q_heads / p.num_kv_heads;
  if (family == "prefill_sm90_gqa") return group <= 16;
  if (family == "prefill_sm90_gqa64") return d == 128 && group <= 8;
  if (family == "prefill_sm90_m192") return d == 64;
  if (family == "prefill_sm90_n80") return d == 256;
  if (family == "prefill_sm90_v64") return d == 128;
  return d <= 128 || family.rfind("prefill_mma", 0) != 0;
}

// Poisons the case's outputs on the device (NaN: an element the kernel leaves unwritten fails the
// check), runs the plan on the default stream and downloads what it wrote into c.
inline ::testing::AssertionResult run_prefill_poisoned(const Plan& plan, testing::PrefillCase& c,
                                                       testing::DevicePrefillCase& dev, testing::DeviceBuffer& workspace) {
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  const Status s = run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  if (!s.ok()) return ::testing::AssertionFailure() << s.message();
  dev.download_outputs(c);
  return ::testing::AssertionSuccess();
}

// Runs the plan over a device copy of c (whose outputs make_decode_case poisoned) with a poisoned
// workspace on the default stream and downloads what it wrote into c.
inline ::testing::AssertionResult run_decode_case(const Plan& plan, testing::DecodeCase& c) {
  testing::DeviceDecodeCase dev(c);
  testing::DeviceBuffer workspace = poisoned_workspace(plan.workspace_bytes());
  const Status s = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  if (!s.ok()) return ::testing::AssertionFailure() << s.message();
  dev.download_outputs(c);
  return ::testing::AssertionSuccess();
}

// One call captured on its own non-blocking stream into an instantiated graph; replay() launches it
// and waits. ok() is false (error() says why) when the stream, the capture, the call or the
// instantiation failed. Destroys what it made.
class CapturedCall {
 public:
  // `call(stream)` returns the Status of the library call it makes on `stream`.
  template <class Call>
  explicit CapturedCall(Call&& call) {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) {
      error_ = "cudaStreamCreateWithFlags failed";
      return;
    }
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      error_ = "cudaStreamBeginCapture failed";
      return;
    }
    const Status captured = call(stream_);
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph_);
    if (!captured.ok()) {
      error_ = "the captured call failed: " + captured.message();
    } else if (ended != cudaSuccess) {
      error_ = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
    } else if (cudaGraphInstantiateWithFlags(&exec_, graph_, cudaGraphInstantiateFlagUseNodePriority) !=
               cudaSuccess) {
      error_ = "cudaGraphInstantiate failed";
      exec_ = nullptr;
    }
  }
  CapturedCall(const CapturedCall&) = delete;
  CapturedCall& operator=(const CapturedCall&) = delete;
  ~CapturedCall() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  cudaStream_t stream() const { return stream_; }
  // Launches the graph and waits for it: cudaSuccess or the first error.
  cudaError_t replay() const {
    const cudaError_t launched = cudaGraphLaunch(exec_, stream_);
    return launched != cudaSuccess ? launched : cudaStreamSynchronize(stream_);
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::string error_;
};

// Replays `graph` (a captured run_decode over dev's buffers) with new lengths: c.seq_lens and its
// device copy take `lens`, the outputs are poisoned first, and what the replay writes must pass the
// fp64 reference. `what` names the case in failures.
inline void expect_replay_with_lengths(const CapturedCall& graph, testing::DeviceDecodeCase& dev,
                                       testing::DecodeCase& c, const std::vector<int32_t>& lens,
                                       const std::string& what = "") {
  std::string named = what + (what.empty() ? "" : " ") + "lengths";
  for (size_t i = 0; i < lens.size(); ++i) named += (i == 0 ? " " : ",") + std::to_string(lens[i]);
  c.seq_lens = lens;
  dev.upload_seq_lens(lens);
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  const cudaError_t replayed = graph.replay();
  EXPECT_EQ(replayed, cudaSuccess) << named;
  if (replayed != cudaSuccess) return;
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << named << ": " << cmp.summary();
}

}  // namespace splitkv::gpu_test

// Skips the test when there is no GPU (CI) or the build lacks the instantiation.
#define SPLITKV_REQUIRE_PLAN_COMPILED(plan)                                                         \
  do {                                                                                              \
    if (!::splitkv::gpu_test::plan_compiled(plan))                                                  \
      GTEST_SKIP() << "not compiled into this build: family " << (plan).family();                     \
  } while (0)

#define SPLITKV_REQUIRE_GPU(dtype, head_dim)                                                    \
  do {                                                                                          \
    if (!::splitkv::testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
    if (!::splitkv::gpu_test::compiled(dtype, head_dim))                                        \
      GTEST_SKIP() << "not compiled into this build: " << ::splitkv::to_string(dtype) << " D=" << (head_dim); \
  } while (0)
