// The adversarial suite on the GPU (src/testing/hostile.hpp): the host part's hostile decode calls
// through the kernels, outputs inside guard bytes, each checked against its promise; run under
// compute-sanitizer memcheck by scripts/gpu_check.sh (zero errors is part of the promise).
// SPLITKV_HOSTILE_SEEDS=N widens the hunt (default 12).
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu_test_util.hpp"
#include "guarded_buffer.hpp"
#include "testing/hostile.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;
using gpu_test::GuardedBuffer;
using gpu_test::rebased;
using testing::hostile::DecodeAttack;

int seeds() {
  const char* env = std::getenv("SPLITKV_HOSTILE_SEEDS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 12;
}

// After a call: a CUDA error or a write past out / lse breaks the promise (returned); otherwise the
// outputs come back to the host for the judge and the result is empty.
std::string after_the_call(GuardedBuffer& out, GuardedBuffer& lse, void* out_host, void* lse_host) {
  const cudaError_t synced = cudaDeviceSynchronize();
  if (synced != cudaSuccess) return std::string("CUDA error after the call: ") + cudaGetErrorString(synced);
  if (!out.guards_intact()) return "wrote outside out";
  if (!lse.guards_intact()) return "wrote outside lse";
  out.download(out_host);
  lse.download(lse_host);
  return "";
}

// Whether `data` points into `array` (an attack's view of the case's own array).
template <class T>
bool inside(const void* data, const std::vector<T>& array) {
  const char* p = static_cast<const char*>(data);
  const char* first = reinterpret_cast<const char*>(array.data());
  return p >= first && p < first + array.size() * sizeof(T);
}

// Points `view` at device memory: a view into the case's host array at the same offset in its
// device copy; a host array of the attack's own (edit_tensors, contiguous as the attacks build it)
// uploaded into a buffer kept in `own` (rebasing it would aim the kernels at an unrelated address).
template <class T>
void to_device(TensorRef& view, const std::vector<T>& array, void* device_copy, std::vector<DeviceBuffer>& own) {
  if (view.data == nullptr) return;
  if (inside(view.data, array)) {
    view = rebased(view, array.data(), device_copy);
    return;
  }
  own.emplace_back(size_t(view.numel()) * sizeof(T));
  own.back().upload(view.data, own.back().bytes());
  view.data = own.back().get();
}

std::string run_on_gpu(const DecodeAttack& a, bool* skipped) {
  Plan plan;
  const Status planned = plan_decode(testing::hostile::planned_problem(a), a.device, a.options, &plan);
  testing::DecodeCase c;
  if (!planned.ok()) return testing::hostile::judge_on_gpu(a, planned, Status::success(), c);
  if (!gpu_test::plan_compiled(plan)) {
    *skipped = true;
    return "";
  }
  if (a.edit_plan) a.edit_plan(plan);
  c = testing::hostile::attack_case(a);
  testing::DeviceDecodeCase dev(c);
  DecodeTensors t = testing::hostile::attack_tensors(a, c);
  // The device copies under the attack's layout (edit_tensors may have moved a pointer: keep its offset).
  const DecodeTensors host = c.host_tensors();
  t.q = rebased(t.q, host.q.data, dev.q.get());
  t.k = rebased(t.k, host.k.data, dev.k.get());
  t.v = rebased(t.v, host.v.data, dev.v.get());
  t.seq_lens = rebased(t.seq_lens, host.seq_lens.data, dev.seq_lens.get());
  // The page table, sinks and tree mask (to_device).
  std::vector<DeviceBuffer> own_arrays;
  to_device(t.block_table, c.block_table, dev.block_table.get(), own_arrays);
  to_device(t.sinks, c.sinks, dev.sinks.get(), own_arrays);
  to_device(t.tree_mask, c.tree_mask, dev.tree_mask.get(), own_arrays);
  if (!t.k_scales.empty()) {
    t.k_scales = rebased(t.k_scales, host.k_scales.data, dev.k_scales.get());
    t.v_scales = rebased(t.v_scales, host.v_scales.data, dev.v_scales.get());
  }
  // *_kc: the tail ring (the attacks give no tail_slots: sequence b's tail is row b).
  if (!t.k_tail.empty()) t.k_tail = rebased(t.k_tail, host.k_tail.data, dev.k_tail.get());
  // keys_after: the case has none, so an attack's own array goes up.
  to_device(t.keys_after, std::vector<int32_t>{}, nullptr, own_arrays);
  GuardedBuffer out(c.out.data(), c.out.size() * sizeof(uint16_t)), lse(c.lse.data(), c.lse.size() * sizeof(float));
  t.out = rebased(t.out, host.out.data, out.get());
  t.lse = rebased(t.lse, host.lse.data, lse.get());
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes() + 64);
  void* ws = a.workspace_null ? nullptr : static_cast<char*>(workspace.get()) + a.workspace_offset;
  const size_t ws_bytes = size_t(int64_t(plan.workspace_bytes()) + a.workspace_delta);
  Status ran = prepare_workspace(plan, ws, ws_bytes, nullptr);
  if (ran.ok()) ran = run_decode(plan, t, ws, ws_bytes, nullptr);
  if (std::string why = after_the_call(out, lse, c.out.data(), c.lse.data()); !why.empty()) return why;
  return testing::hostile::judge_on_gpu(a, planned, ran, c);
}

std::string run_prefill_on_gpu(const testing::hostile::PrefillAttack& a, bool* skipped) {
  Plan plan;
  const Status planned = plan_prefill(a.spec.problem, gpu_test::device(), a.options, &plan);
  testing::PrefillCase c;
  if (!planned.ok()) return testing::hostile::judge(a, planned, Status::success(), c);
  if (!gpu_test::plan_compiled(plan)) {
    *skipped = true;
    return "";
  }
  if (a.edit_plan) a.edit_plan(plan);
  c = testing::hostile::attack_case(a);
  testing::DevicePrefillCase dev(c);
  PrefillTensors t = testing::hostile::attack_tensors(a, c);
  const PrefillTensors host = c.host_tensors();
  t.q = rebased(t.q, host.q.data, dev.q.get());
  t.k = rebased(t.k, host.k.data, dev.k.get());
  t.v = rebased(t.v, host.v.data, dev.v.get());
  t.cu_seqlens_q = rebased(t.cu_seqlens_q, host.cu_seqlens_q.data, dev.cu_seqlens_q.get());
  t.cu_seqlens_k = rebased(t.cu_seqlens_k, host.cu_seqlens_k.data, dev.cu_seqlens_k.get());
  std::vector<DeviceBuffer> own_arrays;
  to_device(t.sinks, c.sinks, dev.sinks.get(), own_arrays);
  if (!a.device_cu_seqlens_q.empty()) dev.cu_seqlens_q.upload(a.device_cu_seqlens_q.data(), dev.cu_seqlens_q.bytes());
  if (!a.device_cu_seqlens_k.empty()) dev.cu_seqlens_k.upload(a.device_cu_seqlens_k.data(), dev.cu_seqlens_k.bytes());
  GuardedBuffer out(c.out.data(), c.out.size() * sizeof(uint16_t)), lse(c.lse.data(), c.lse.size() * sizeof(float));
  t.out = rebased(t.out, host.out.data, out.get());
  t.lse = rebased(t.lse, host.lse.data, lse.get());
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  const Status ran = run_prefill(plan, t, workspace.get(), plan.workspace_bytes(), nullptr);
  if (std::string why = after_the_call(out, lse, c.out.data(), c.lse.data()); !why.empty()) return why;
  return testing::hostile::judge(a, planned, ran, c);
}

TEST(AdversarialGpu, PrefillPromisesHoldOnTheGpu) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  int attacks = 0, broken = 0, skipped = 0;
  for (int seed = 1; seed <= seeds(); ++seed) {
    for (const testing::hostile::PrefillAttack& a : testing::hostile::prefill_attacks(uint64_t(seed))) {
      bool skip = false;
      const std::string why = run_prefill_on_gpu(a, &skip);
      ++attacks;
      skipped += skip;
      if (!why.empty()) {
        ++broken;
        ADD_FAILURE() << a.name << ": " << why;
      }
    }
  }
  std::printf("adversarial prefill (GPU): %d attacks, %d skipped (not compiled), %d broken promises\n", attacks,
              skipped, broken);
}

TEST(AdversarialGpu, CombinePromisesHoldOnTheGpu) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  int attacks = 0, broken = 0;
  for (int seed = 1; seed <= seeds(); ++seed) {
    for (const testing::hostile::CombineAttack& a : testing::hostile::combine_attacks(uint64_t(seed))) {
      ++attacks;
      testing::hostile::CombineCase c = testing::hostile::attack_case(a);
      DeviceBuffer o = DeviceBuffer::from(c.partial_o), l = DeviceBuffer::from(c.partial_lse);
      GuardedBuffer out(c.out.data(), c.out.size() * sizeof(uint16_t)), lse(c.lse.data(), c.lse.size() * sizeof(float));
      CombineTensors t = c.host_tensors();
      t.partial_o.data = o.get();
      t.partial_lse.data = l.get();
      t.out.data = out.get();
      t.lse.data = lse.get();
      if (a.edit_tensors) a.edit_tensors(t);
      const Status ran = run_combine(a.problem, t, nullptr);
      std::string why = after_the_call(out, lse, c.out.data(), c.lse.data());
      if (why.empty()) why = testing::hostile::judge(a, ran, c);
      if (!why.empty()) {
        ++broken;
        ADD_FAILURE() << a.name << ": " << why;
      }
    }
  }
  std::printf("adversarial combine (GPU): %d attacks, %d broken promises\n", attacks, broken);
}

TEST(AdversarialGpu, EveryPromiseHoldsOnTheGpu) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  int attacks = 0, broken = 0, skipped = 0;
  for (int seed = 1; seed <= seeds(); ++seed) {
    for (const DecodeAttack& a : testing::hostile::decode_attacks(uint64_t(seed))) {
      bool skip = false;
      const std::string why = run_on_gpu(a, &skip);
      ++attacks;
      skipped += skip;
      if (!why.empty()) {
        ++broken;
        ADD_FAILURE() << a.name << ": " << why;
      }
    }
  }
  std::printf("adversarial (GPU): %d attacks, %d skipped (not compiled), %d broken promises\n", attacks, skipped,
              broken);
}

}  // namespace
}  // namespace splitkv
