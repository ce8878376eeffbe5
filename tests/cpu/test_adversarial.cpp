// The adversarial suite, host part (src/testing/hostile.hpp): hostile decode calls of every class
// from many random base cases, run through validation and the CPU backend with guard bytes around
// every output, each checked against its promise (a named error; or NaN in the affected sequence
// only, the rest matching the fp64 reference; or a plain match). The same attacks run on the GPU
// in tests/gpu/test_adversarial_gpu.cpp. SPLITKV_HOSTILE_SEEDS=N widens the hunt (default 12).
#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "testing/hostile.hpp"

namespace splitkv {
namespace {

using testing::hostile::DecodeAttack;
using testing::hostile::Promise;

int seeds() {
  const char* env = std::getenv("SPLITKV_HOSTILE_SEEDS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 12;
}

// Host memory with kGuard bytes of a pattern before and after the part handed to the call.
template <class T>
struct GuardedHost {
  static constexpr size_t kGuard = 256;
  static constexpr unsigned char kPattern = 0xa5;
  std::vector<unsigned char> bytes;
  explicit GuardedHost(const std::vector<T>& init) : bytes(init.size() * sizeof(T) + 2 * kGuard, kPattern) {
    std::memcpy(bytes.data() + kGuard, init.data(), init.size() * sizeof(T));
  }
  void* get() { return bytes.data() + kGuard; }
  void copy_to(std::vector<T>& dst) const { std::memcpy(dst.data(), bytes.data() + kGuard, dst.size() * sizeof(T)); }
  bool intact(size_t payload) const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (bytes[i] != kPattern || bytes[kGuard + payload + i] != kPattern) return false;
    }
    return true;
  }
};

// Runs one attack on the host: plan, the case, the call (the CPU backend; the GPU entry point for
// workspace attacks, which it refuses before any launch), then the judge.
std::string run_on_host(const DecodeAttack& a) {
  Plan plan;
  const Status planned = plan_decode(testing::hostile::planned_problem(a), a.device, a.options, &plan);
  if (!planned.ok()) {
    testing::DecodeCase none;
    return testing::hostile::judge(a, planned, Status::success(), none);
  }
  if (a.edit_plan) a.edit_plan(plan);
  testing::DecodeCase c = testing::hostile::attack_case(a);
  DecodeTensors t = testing::hostile::attack_tensors(a, c);
  GuardedHost<uint16_t> out(c.out);
  GuardedHost<float> lse(c.lse);
  t.out.data = out.get();
  t.lse.data = lse.get();
  Status ran;
  const bool workspace_attack = a.workspace_null || a.workspace_delta != 0 || a.workspace_offset != 0;
  if (workspace_attack) {
    std::vector<unsigned char> workspace(plan.workspace_bytes() + 64);
    void* base = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) % 16) % 16;
    void* ws = a.workspace_null ? nullptr : static_cast<char*>(base) + a.workspace_offset;
    ran = run_decode(plan, t, ws, size_t(int64_t(plan.workspace_bytes()) + a.workspace_delta), nullptr);
  } else {
    ran = cpu::run_decode(plan, t);
  }
  if (!out.intact(c.out.size() * sizeof(uint16_t))) return "wrote outside out";
  if (!lse.intact(c.lse.size() * sizeof(float))) return "wrote outside lse";
  out.copy_to(c.out);
  lse.copy_to(c.lse);
  return testing::hostile::judge(a, planned, ran, c);
}

TEST(Adversarial, EveryPromiseHoldsOnTheHost) {
  int attacks = 0, broken = 0;
  int by_promise[3] = {0, 0, 0};
  for (int seed = 1; seed <= seeds(); ++seed) {
    for (const DecodeAttack& a : testing::hostile::decode_attacks(uint64_t(seed))) {
      ++attacks;
      ++by_promise[int(a.promise)];
      const std::string why = run_on_host(a);
      if (!why.empty()) {
        ++broken;
        ADD_FAILURE() << a.name << ": " << why;
      }
    }
  }
  // The suite itself: every class present, so a generator that silently stopped attacking fails.
  EXPECT_GT(by_promise[int(Promise::kNamedError)], 20 * seeds());
  EXPECT_GT(by_promise[int(Promise::kNanIn)], 5 * seeds());
  EXPECT_GT(by_promise[int(Promise::kMatchesReference)], 4 * seeds());
  std::printf("adversarial (host): %d attacks, %d broken promises\n", attacks, broken);
}

// Prefill's named-error attacks (host copies, layouts, options, plans): refused before anything
// runs, so they run here; its device-data attacks need the kernels (tests/gpu/test_adversarial_gpu.cpp).
TEST(Adversarial, PrefillRefusesByNameOnTheHost) {
  int attacks = 0, broken = 0;
  for (int seed = 1; seed <= seeds(); ++seed) {
    for (const testing::hostile::PrefillAttack& a : testing::hostile::prefill_attacks(uint64_t(seed))) {
      if (a.promise != Promise::kNamedError) continue;
      ++attacks;
      Plan plan;
      const Status planned = plan_prefill(a.spec.problem, DeviceInfo::h200(), a.options, &plan);
      Status ran;
      testing::PrefillCase c;
      if (planned.ok()) {
        if (a.edit_plan) a.edit_plan(plan);
        c = testing::hostile::attack_case(a);
        const PrefillTensors t = testing::hostile::attack_tensors(a, c);
        std::vector<unsigned char> workspace(plan.workspace_bytes() + 32);
        void* ws = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) % 16) % 16;
        ran = run_prefill(plan, t, ws, plan.workspace_bytes(), nullptr);
      }
      const std::string why = testing::hostile::judge(a, planned, ran, c);
      if (!why.empty()) {
        ++broken;
        ADD_FAILURE() << a.name << ": " << why;
      }
    }
  }
  EXPECT_GT(attacks, 10 * seeds());
  std::printf("adversarial prefill (host): %d attacks, %d broken promises\n", attacks, broken);
}

// run_combine's named-error attacks (its device-value attacks run on the GPU).
TEST(Adversarial, CombineRefusesByNameOnTheHost) {
  int attacks = 0;
  for (int seed = 1; seed <= seeds(); ++seed) {
    for (const testing::hostile::CombineAttack& a : testing::hostile::combine_attacks(uint64_t(seed))) {
      if (a.promise != Promise::kNamedError) continue;
      ++attacks;
      testing::hostile::CombineCase c = testing::hostile::attack_case(a);
      CombineTensors t = c.host_tensors();
      if (a.edit_tensors) a.edit_tensors(t);
      const std::string why = testing::hostile::judge(a, run_combine(a.problem, t, nullptr), c);
      EXPECT_TRUE(why.empty()) << a.name << ": " << why;
    }
  }
  EXPECT_GT(attacks, 5 * seeds());
}

// A test that cannot fail is a defect: a judge that accepted everything would pass the suite, so
// the judge must catch a kept-looking run that broke each kind of promise.
TEST(Adversarial, TheJudgeCatchesBrokenPromises) {
  const std::vector<DecodeAttack> attacks = testing::hostile::decode_attacks(3);
  for (const DecodeAttack& a : attacks) {
    if (a.promise == Promise::kNamedError) {
      testing::DecodeCase none;
      EXPECT_FALSE(testing::hostile::judge(a, Status::success(), Status::success(), none).empty()) << a.name;
      EXPECT_FALSE(testing::hostile::judge(a, Status::invalid("other", "x", "y"), Status::success(), none).empty())
          << a.name;
      continue;
    }
    Plan plan;
    ASSERT_TRUE(plan_decode(testing::hostile::planned_problem(a), a.device, a.options, &plan).ok()) << a.name;
    testing::DecodeCase c = testing::hostile::attack_case(a);
    // Outputs left as poisoned: NaN everywhere fails a plain match; for kNanIn the other sequences
    // are NaN too.
    if (a.promise == Promise::kMatchesReference || c.problem.batch > 1) {
      EXPECT_FALSE(testing::hostile::judge(a, Status::success(), Status::success(), c).empty()) << a.name;
    }
    if (a.promise == Promise::kNanIn) {  // finite where NaN is promised
      std::fill(c.out.begin(), c.out.end(), uint16_t(0x3f80));
      std::fill(c.lse.begin(), c.lse.end(), 0.f);
      EXPECT_FALSE(testing::hostile::judge(a, Status::success(), Status::success(), c).empty()) << a.name;
    }
  }
}

}  // namespace
}  // namespace splitkv
