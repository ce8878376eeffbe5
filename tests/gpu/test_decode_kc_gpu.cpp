// Decode over the keys-per-channel caches (int8_kc, int4_kc, k8v4_kc) through run_decode, on both
// routes: the planner's own (chunked prefill over the dequantized cache: complete 64-position
// groups from codes and group scales, the rest of each sequence from the 16-bit tail ring) and the
// decode kernel decode_kc_n8 named by options.family (the group scale folded into Q per group,
// the tail's keys multiplied as stored). Checked against the fp64 reference over the host
// definition of the cache, outputs and workspace poisoned with NaN: q_len 1 with GQA, MQA and MHA,
// lengths on and beside group edges (0, 1, 63, 64, 65), paged (64, 128, 256: whole groups) and contiguous, speculative rows,
// splits (planned, forced, batch-invariant), fp16 at D = 64, D = 256 (chunked prefill only), a
// 65k-key row; a tail slot outside the ring gives NaN in that sequence only; the same bits twice;
// batch-invariant bits (the kernel); a captured graph replayed with new lengths (both routes).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/decode_check.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;
using testing::DeviceDecodeCase;

constexpr KvFormat kKcFormats[] = {KvFormat::kInt8Kc, KvFormat::kInt4Kc, KvFormat::kK8V4Kc};

constexpr const char* kDecodeFamily = "decode_kc_n8";

struct KcCase {
  std::string name;
  testing::DecodeCaseSpec spec;
  int num_splits = 0;  // 0: planner
  std::string family;  // empty: the planner's route (chunked prefill); else a decode family
  int split_tokens = 0;
};

// Plans and runs one case; false when this build lacks the family.
bool run(const KcCase& k, testing::DecodeCase* c, const std::vector<int32_t>* tail_slots = nullptr) {
  *c = testing::make_decode_case(k.spec);
  PlanOptions o;
  o.num_splits = k.num_splits;
  o.family = k.family;
  o.split_tokens = k.split_tokens;
  Plan plan;
  const Status planned = plan_decode(c->problem, gpu_test::device(), o, &plan);
  EXPECT_TRUE(planned.ok()) << k.name << ": " << planned.message();
  if (!planned.ok()) return true;
  EXPECT_EQ(plan.decode_via_prefill(), k.family.empty()) << k.name << ": " << describe(plan);
  if (!k.family.empty()) EXPECT_EQ(plan.family(), k.family) << k.name;
  if (!gpu_test::plan_compiled(plan)) return false;
  DeviceDecodeCase dev(*c);
  DeviceBuffer slots;
  if (tail_slots != nullptr) {
    slots = DeviceBuffer::from(*tail_slots);
    dev.tensors.tail_slots = TensorRef::contiguous(slots.get(), DType::kI32, {int64_t(tail_slots->size())});
  }
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  const Status ran = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  EXPECT_TRUE(ran.ok()) << k.name << ": " << ran.message();
  dev.download_outputs(*c);
  return true;
}

testing::DecodeSpecBuilder shape(KvFormat f, int batch, int hq, int hkv, int max_len) {
  return testing::DecodeSpecBuilder(batch, hq, hkv, max_len).format(f);
}

std::vector<KcCase> kc_cases() {
  std::vector<KcCase> cases;
  for (KvFormat f : kKcFormats) {
    const std::string fmt = to_string(f);
    auto add = [&](std::string name, testing::DecodeCaseSpec s, int splits = 0) {
      cases.push_back(KcCase{fmt + "_" + name, std::move(s), splits});
    };
    add("group_edges_gqa", shape(f, 6, 32, 8, 700).lens({0, 1, 63, 64, 65, 700}).spec);
    add("paged128_shuffled", shape(f, 3, 32, 8, 3000).paged(128).lens({3000, 17, 0}).spec);
    add("paged64_mqa", shape(f, 3, 8, 1, 2000).paged(64).lens({2000, 5, 1234}).spec);
    add("mha_contiguous", shape(f, 1, 16, 16, 700).spec);
    add("q4_causal_paged256", shape(f, 2, 32, 8, 5000).paged(256).queries(4, true).lens({4097, 5000}).spec);
    add("forced_splits", shape(f, 2, 32, 8, 4097).lens({4097, 100}).spec, 6);
    add("fp16_d64_paged64", shape(f, 2, 16, 4, 1500).dtype(DType::kF16).head_dim(64).paged(64).lens({1500, 31}).spec);
    add("hd256", shape(f, 2, 16, 4, 1500).head_dim(256).lens({1500, 127}).spec);
    // The decode kernel (<= 8 packed rows per KV head).
    auto kernel = [&](std::string name, testing::DecodeCaseSpec s, int splits = 0, int split_tokens = 0) {
      cases.push_back(KcCase{fmt + "_n8_" + name, std::move(s), splits, kDecodeFamily, split_tokens});
    };
    kernel("group_edges_gqa", shape(f, 6, 32, 8, 700).lens({0, 1, 63, 64, 65, 700}).spec);
    kernel("paged128_shuffled", shape(f, 3, 32, 8, 3000).paged(128).lens({3000, 17, 0}).spec);
    kernel("paged64_mqa", shape(f, 3, 8, 1, 2000).paged(64).lens({2000, 5, 1234}).spec);
    kernel("paged256", shape(f, 2, 32, 8, 5000).paged(256).lens({4097, 5000}).spec);
    kernel("mha_contiguous", shape(f, 1, 16, 16, 700).spec);
    kernel("q2_causal_gqa4", shape(f, 2, 32, 8, 1000).queries(2, true).lens({1000, 3}).spec);
    kernel("forced_splits", shape(f, 2, 32, 8, 4097).lens({4097, 100}).spec, 24);
    kernel("batch_invariant_split", shape(f, 3, 32, 8, 5000).lens({5000, 64, 0}).spec, 0, 512);
    kernel("fp16_d64_paged64", shape(f, 2, 16, 4, 1500).dtype(DType::kF16).head_dim(64).paged(64).lens({1500, 31}).spec);
  }
  cases.push_back(KcCase{"int4_kc_n8_len65537", shape(KvFormat::kInt4Kc, 1, 8, 2, 65537).spec, 0, kDecodeFamily});
  return cases;
}

class KcDecodeVsReference : public ::testing::TestWithParam<KcCase> {};

TEST_P(KcDecodeVsReference, MatchesFp64ReferenceOverTheHostDefinition) {
  const KcCase& k = GetParam();
  SPLITKV_REQUIRE_GPU(k.spec.problem.dtype, k.spec.problem.head_dim);
  for (float q_scale : {1.f, 8.f}) {  // flat and peaked softmax
    KcCase scaled = k;
    scaled.spec.q_scale = q_scale;
    testing::DecodeCase c;
    if (!run(scaled, &c)) GTEST_SKIP() << "not compiled into this build";
    const testing::Comparison cmp = testing::check_decode(c);
    EXPECT_TRUE(cmp.passed) << k.name << " q_scale=" << q_scale << ": " << cmp.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, KcDecodeVsReference, ::testing::ValuesIn(kc_cases()),
                         [](const ::testing::TestParamInfo<KcCase>& info) { return info.param.name; });

// Every format on both routes: the planner's (family empty) and the decode kernel.
struct Route {
  KvFormat format;
  std::string family;
};
std::vector<Route> routes() {
  std::vector<Route> r;
  for (KvFormat f : kKcFormats) {
    r.push_back({f, ""});
    r.push_back({f, kDecodeFamily});
  }
  return r;
}

// Device data the host cannot check: a tail slot outside the ring poisons its sequence only.
TEST(KcDecodeGpu, ATailSlotOutsideTheRingIsNaNInItsSequenceOnly) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (const Route& route : routes()) {
    const std::string what = std::string(to_string(route.format)) + " " + route.family;
    const KcCase k{"bad_tail_slot", shape(route.format, 3, 32, 8, 300).lens({300, 200, 100}).spec, 0, route.family};
    for (int32_t bad : {-1, 3, 1 << 30}) {
      const std::vector<int32_t> slots = {0, bad, 2};
      testing::DecodeCase c;
      if (!run(k, &c, &slots)) GTEST_SKIP() << "not compiled into this build";
      const int hq = c.problem.num_q_heads, d = c.problem.head_dim;
      for (int b = 0; b < 3; ++b) {
        const float lse = c.lse[size_t(b) * hq];
        EXPECT_EQ(std::isnan(lse), b == 1) << what << " tail slot " << bad << " sequence " << b;
        int nan_outputs = 0;  // bf16 NaN: exponent all ones, mantissa not zero
        for (int i = 0; i < hq * d; ++i) nan_outputs += (c.out[size_t(b) * hq * d + i] & 0x7fff) > 0x7f80;
        EXPECT_EQ(nan_outputs, b == 1 ? hq * d : 0) << what << " tail slot " << bad << " sequence " << b;
      }
    }
  }
}

TEST(KcDecodeGpu, TheSameInputGivesTheSameBits) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (const Route& route : routes()) {
    const std::string what = std::string(to_string(route.format)) + " " + route.family;
    const KcCase k{"twice", shape(route.format, 2, 32, 8, 8000).lens({8000, 130}).spec, 5, route.family};
    testing::DecodeCase first, second;
    if (!run(k, &first) || !run(k, &second)) GTEST_SKIP() << "not compiled into this build";
    EXPECT_EQ(first.out, second.out) << what;
    EXPECT_EQ(std::memcmp(first.lse.data(), second.lse.data(), first.lse.size() * sizeof(float)), 0) << what;
  }
}

// Batch-invariant mode (split_tokens) on the decode kernel: a sequence's bits do not depend on the
// batch around it.
TEST(KcDecodeGpu, BatchInvariantModeGivesTheSameBitsWhateverTheBatch) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (KvFormat f : kKcFormats) {
    PlanOptions o;
    o.split_tokens = 1024;
    o.family = kDecodeFamily;
    if (!gpu_test::check_batch_invariant_bits(
            testing::make_decode_case(shape(f, 1, 32, 8, 3000).spec),
            testing::make_decode_case(shape(f, 3, 32, 8, 20000).lens({20000, 3000, 7}).spec), 1, o, to_string(f))) {
      GTEST_SKIP() << "not compiled into this build: " << to_string(f);
    }
  }
}

// One captured call serves new lengths on both routes. A *_kc cache's content depends on each
// sequence's length (which groups are complete, what the tail holds), so each replay uploads the
// cache of a case made for its lengths into the captured buffers.
TEST(KcDecodeGpu, CudaGraphReplayServesNewLengths) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (const Route& route : routes()) {
    const std::string what = std::string(to_string(route.format)) + " " + route.family;
    auto make = [&](std::vector<int> lens) {
      return testing::make_decode_case(shape(route.format, 3, 32, 8, 8192).lens(std::move(lens)).spec);
    };
    testing::DecodeCase c = make({8192, 8192, 8192});
    Plan plan;
    PlanOptions o;
    o.max_splits = 16;
    o.family = route.family;
    ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plan).ok());
    if (!gpu_test::plan_compiled(plan)) GTEST_SKIP() << "not compiled into this build: " << what;
    DeviceDecodeCase dev(c);
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    const gpu_test::CapturedCall graph(
        [&](cudaStream_t stream) { return run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), stream); });
    ASSERT_TRUE(graph.ok()) << what << ": " << graph.error();
    for (const std::vector<int>& lens : {std::vector<int>{8192, 100, 5000}, {1, 8191, 0}}) {
      testing::DecodeCase next = make(lens);
      dev.q.upload(next.q.data(), next.q.size() * sizeof(uint16_t));
      dev.k.upload(next.k.data(), next.k.byte_size());
      dev.v.upload(next.v.data(), next.v.byte_size());
      dev.k_scales.upload(next.k_scales.data(), next.k_scales.byte_size());
      dev.v_scales.upload(next.v_scales.data(), next.v_scales.byte_size());
      dev.k_tail.upload(next.k_tail.data(), next.k_tail.byte_size());
      dev.upload_seq_lens(next.seq_lens);
      testing::poison_outputs(next);
      dev.upload_outputs(next);
      ASSERT_EQ(graph.replay(), cudaSuccess);
      dev.download_outputs(next);
      const testing::Comparison cmp = testing::check_decode(next);
      EXPECT_TRUE(cmp.passed) << what << " lengths " << lens[0] << "," << lens[1] << "," << lens[2] << ": "
                              << cmp.summary();
    }
  }
}

}  // namespace
}  // namespace splitkv
