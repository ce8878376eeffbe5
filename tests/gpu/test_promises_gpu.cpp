// The API's promises under hostile input on the GPU (docs/CONTRACTS.md), one test per broken
// promise found in review: FP8 scales with a stride, lengths past max_kv_len on every route, a bad
// device cu_seqlens_q beside KV splits (nothing written outside the output: guard bytes), an
// empty caller partial holding NaN, concurrent launches of one kernel with different shared-memory
// sizes, strides the TMA loads cannot take. Run under compute-sanitizer memcheck by
// scripts/gpu_check.sh; each skips without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/split_rule.hpp"
#include "kernels/common/varlen_rows.hpp"
#include "gpu_test_util.hpp"
#include "guarded_buffer.hpp"
#include "testing/decode_check.hpp"
#include "testing/prefill_case.hpp"
#include "testing/random_fill.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;
using testing::DeviceDecodeCase;
using testing::DecodeSpecBuilder;

bool is_nan_16(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0; }

// A decode route of the promise tests: a case shape and the options that send it down the route.
struct Route {
  std::string name;
  DecodeSpecBuilder spec;
  PlanOptions options;
};
// add(name, builder, edit): a route whose options are the defaults edited by edit(PlanOptions&).
auto route_adder(std::vector<Route>& routes) {
  return [&routes](std::string name, DecodeSpecBuilder b, auto edit) {
    PlanOptions o;
    edit(o);
    routes.push_back({std::move(name), std::move(b), o});
  };
}

// Runs `c` under `plan` with NaN-poisoned outputs and workspace, its page table (with hide_lengths
// also its lengths) as device data the host does not see; the outputs come back into `c`.
void run_with_device_data(const Plan& plan, testing::DecodeCase& c, bool hide_lengths) {
  testing::poison_outputs(c);
  DeviceDecodeCase dev(c);
  if (hide_lengths) dev.tensors.seq_lens_host = nullptr;
  dev.tensors.block_table_host = nullptr;
  DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
  ASSERT_TRUE(prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr).ok());
  const Status s = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  dev.download_outputs(c);
}

// Item 1: FP8's per-head scales are read through their stride: one scale broadcast to every head
// (stride 0) and a column of a [Hkv, 2] tensor both match the fp64 reference over the same tensors.
TEST(PromisesGpu, Fp8ScalesHonourTheirStride) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  for (int stride : {0, 2}) {
    for (int q_len : {1, 4}) {
      testing::DecodeCase c = testing::make_decode_case(
          DecodeSpecBuilder(2, 32, 8, 1500).format(KvFormat::kFP8E4M3).queries(q_len, true).paged(16).spec);
      // The scales as the test lays them out: head h's at element h * stride (column 0 of [Hkv, 2]
      // holds the real ones, column 1 a value that would wreck the output if read).
      const int hkv = c.problem.num_kv_heads;
      std::vector<float> k_host(size_t(2 * hkv), 1e30f), v_host(size_t(2 * hkv), 1e30f);
      const float* k_real = static_cast<const float*>(c.host_tensors().k_scales.data);
      const float* v_real = static_cast<const float*>(c.host_tensors().v_scales.data);
      for (int h = 0; h < hkv; ++h) {
        k_host[size_t(h) * 2] = stride == 0 ? k_real[0] : k_real[h];
        v_host[size_t(h) * 2] = stride == 0 ? v_real[0] : v_real[h];
      }
      for (auto [buffer, ref, host] : {std::tuple{&c.k_scales, &c.k_scales_ref, &k_host},
                                       std::tuple{&c.v_scales, &c.v_scales_ref, &v_host}}) {
        *buffer = testing::ElementBuffer(DType::kF32, host->size());
        std::memcpy(buffer->data(), host->data(), host->size() * sizeof(float));
        ref->stride[0] = stride;  // the reference and the kernel read the same layout
      }
      Plan plan;
      ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), {}, &plan).ok());
      SPLITKV_REQUIRE_PLAN_COMPILED(plan);
      DeviceDecodeCase dev(c);
      DeviceBuffer workspace(plan.workspace_bytes());
      ASSERT_TRUE(run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
      dev.download_outputs(c);
      const testing::Comparison cmp = testing::check_decode(c);
      EXPECT_TRUE(cmp.passed) << "scale stride " << stride << " q_len " << q_len << ": " << cmp.summary();
    }
  }
}

// Item 2: on every route a device length in (max_kv_len, capacity] gives NaN in that sequence
// only; the other sequence's bits are those of a run where every length is within the bound.
TEST(PromisesGpu, LengthsPastMaxKvLenGiveNanOnEveryRoute) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  std::vector<Route> routes;
  const auto add = route_adder(routes);
  const auto none = [](PlanOptions&) {};
  add("decode", DecodeSpecBuilder(3, 32, 8, 2000).paged(16), none);
  add("split_tokens", DecodeSpecBuilder(3, 32, 8, 2000).paged(16), [](PlanOptions& o) { o.split_tokens = 256; });
  add("contiguous_splits", DecodeSpecBuilder(3, 32, 8, 2000), [](PlanOptions& o) { o.num_splits = 5; });
  add("fused_combine", DecodeSpecBuilder(3, 32, 8, 2000).paged(16), [](PlanOptions& o) {
    o.num_splits = 4;
    o.merge = Merge::kFused;
  });
  add("cluster_combine", DecodeSpecBuilder(3, 32, 8, 2000).paged(16), [](PlanOptions& o) {
    o.num_splits = 4;
    o.merge = Merge::kCluster;
  });
  add("int8", DecodeSpecBuilder(3, 32, 8, 2000).paged(16).format(KvFormat::kInt8), none);
  add("int4_q4", DecodeSpecBuilder(3, 32, 8, 2000).paged(16).format(KvFormat::kInt4).queries(4, true), none);
  add("speculative_32_rows", DecodeSpecBuilder(3, 28, 4, 2000).paged(16).queries(8, true),
      [](PlanOptions& o) { o.tuning.prefill_route = false; });
  add("prefill_route", DecodeSpecBuilder(3, 28, 4, 2000).paged(16).queries(8, true),
      [](PlanOptions& o) { o.family = "prefill_sm90_gqa64"; });
  add("chunked_prefill_mma", DecodeSpecBuilder(3, 8, 8, 2000).paged(16).queries(8, true),
      [](PlanOptions& o) { o.family = "prefill_mma"; });
  add("quantized_prefill_route", DecodeSpecBuilder(3, 8, 8, 2000).paged(16).queries(8, true).format(KvFormat::kFP8E4M3),
      [](PlanOptions& o) { o.family = "prefill_mma"; });
  for (Route& r : routes) {
    SCOPED_TRACE(r.name);
    r.spec.lens({2000, 900, 1500});
    testing::DecodeCase hostile = testing::make_decode_case(r.spec.spec);
    hostile.problem.max_kv_len = 1024;  // sequences 0 and 2 break the plan's bound
    testing::DecodeCase clean = hostile;
    clean.seq_lens = {1024, 900, 1024};
    Plan plan;
    const Status planned = plan_decode(hostile.problem, gpu_test::device(), r.options, &plan);
    if (!planned.ok()) {
      ADD_FAILURE() << planned.message();
      continue;
    }
    if (!gpu_test::plan_compiled(plan)) continue;
    for (testing::DecodeCase* c : {&hostile, &clean}) run_with_device_data(plan, *c, /*hide_lengths=*/true);
    const testing::Comparison cmp = testing::check_decode(clean);
    EXPECT_TRUE(cmp.passed) << cmp.summary();
    for (int b : {0, 2}) {
      for (uint16_t bits : testing::sequence_output_bits(hostile, b)) ASSERT_TRUE(is_nan_16(bits)) << "sequence " << b;
      for (int h = 0; h < hostile.problem.num_q_heads; ++h) {
        EXPECT_TRUE(std::isnan(hostile.lse[size_t(b * hostile.problem.num_q_heads + h) * hostile.problem.q_len]));
      }
    }
    EXPECT_EQ(testing::sequence_output_bits(hostile, 1), testing::sequence_output_bits(clean, 1));
  }
}

// A windowed sequence's decode reads no page wholly before its start edge (the first visible key
// rounded down by window_start_edge; docs/CONTRACTS.md): an invalid id there leaves every output's
// bits as they were, one in the window gives NaN in that sequence only. Every decode family and
// merge that serves a window (the CPU backend's side: tests/cpu/test_promises.cpp).
TEST(PromisesGpu, AWindowReadsNoPageBeforeItsStartEdge) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  std::vector<Route> routes;
  const auto add = route_adder(routes);
  add("n8_one_split", DecodeSpecBuilder(2, 32, 8, 3000).paged(16), [](PlanOptions& o) { o.num_splits = 1; });
  add("n8_splits", DecodeSpecBuilder(2, 32, 8, 3000).paged(16), [](PlanOptions& o) { o.num_splits = 3; });
  add("split_tokens", DecodeSpecBuilder(2, 32, 8, 3000).paged(16), [](PlanOptions& o) { o.split_tokens = 256; });
  add("m16_q4_fused", DecodeSpecBuilder(2, 32, 8, 3000).paged(16).queries(4, true), [](PlanOptions& o) {
    o.num_splits = 2;
    o.merge = Merge::kFused;
  });
  add("m32_q8_one_split", DecodeSpecBuilder(2, 32, 8, 3000).paged(16).queries(8, true), [](PlanOptions& o) {
    o.family = "decode_mma_m32";
    o.num_splits = 1;
  });
  add("int4_one_split", DecodeSpecBuilder(2, 32, 8, 3000).paged(16).format(KvFormat::kInt4),
      [](PlanOptions& o) { o.num_splits = 1; });
  add("fp8_q4_splits", DecodeSpecBuilder(2, 32, 8, 3000).paged(32).format(KvFormat::kFP8E4M3).queries(4, true),
      [](PlanOptions& o) { o.num_splits = 3; });
  for (Route& r : routes) {
    SCOPED_TRACE(r.name);
    r.spec.lens({3000, 250});
    r.spec.spec.problem.window_left = 100;
    testing::DecodeCase clean = testing::make_decode_case(r.spec.spec);
    Plan plan;
    const Status planned = plan_decode(clean.problem, gpu_test::device(), r.options, &plan);
    if (!planned.ok()) {
      ADD_FAILURE() << planned.message();
      continue;
    }
    if (!gpu_test::plan_compiled(plan)) continue;
    const int page_size = clean.problem.page_size, q_len = clean.problem.q_len;
    const int first = detail::first_visible_key(3000, 0, q_len, 100);
    const int edge = detail::window_start_edge(plan.num_splits(), plan.split_tokens(), plan.block_n(), false);
    const int start = detail::split_base(first, edge);
    const int page_before = start / page_size - 1, page_seen = first / page_size;
    ASSERT_GE(page_before, 0);
    run_with_device_data(plan, clean, /*hide_lengths=*/false);
    const testing::Comparison cmp = testing::check_decode(clean);
    EXPECT_TRUE(cmp.passed) << cmp.summary();
    for (int page : {page_before, page_seen}) {
      testing::DecodeCase c = clean;
      c.block_table[size_t(page)] = -1;  // sequence 0's entry
      run_with_device_data(plan, c, /*hide_lengths=*/false);
      EXPECT_EQ(testing::sequence_output_bits(c, 1), testing::sequence_output_bits(clean, 1));
      if (page == page_before) {
        EXPECT_EQ(testing::sequence_output_bits(c, 0), testing::sequence_output_bits(clean, 0)) << "page " << page;
      } else {
        for (uint16_t bits : testing::sequence_output_bits(c, 0)) ASSERT_TRUE(is_nan_16(bits)) << "page " << page;
      }
    }
  }
}

// Item 3: varlen chunked prefill split over the keys (the planner's choice for short chunks over
// long caches) with a device cu_seqlens_q far outside the tensor: that sequence's rows (clamped
// into the tensor) are NaN, the others match the reference, nothing is written outside out / lse.
TEST(PromisesGpu, BadCuSeqlensQBesideSplitsWritesNothingOutside) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::PrefillCaseSpec spec;
  PrefillProblem& p = spec.problem;
  p.batch = 3;
  p.num_q_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.varlen = true;
  p.causal = true;
  p.max_q_len = 40;
  p.max_kv_len = 20000;
  spec.q_lens = {40, 16, 30};
  spec.kv_lens = {20000, 12000, 16000};
  PlanOptions o;
  o.strategy = Strategy::kSplitKV;
  o.num_splits = 4;
  for (const std::vector<int32_t>& bad_cu : {std::vector<int32_t>{0, 40, 1 << 28, 86},
                                             std::vector<int32_t>{0, 40, -(1 << 28), 86},
                                             std::vector<int32_t>{0, 40, 80, 56}}) {
    testing::PrefillCase c = testing::make_prefill_case(spec);
    Plan plan;
    ASSERT_TRUE(plan_prefill(c.problem, gpu_test::device(), o, &plan).ok());
    ASSERT_GT(plan.num_splits(), 1) << plan.note();
    SPLITKV_REQUIRE_PLAN_COMPILED(plan);
    testing::DevicePrefillCase dev(c);
    const size_t out_bytes = c.out.size() * 2, lse_bytes = c.lse.size() * 4;
    gpu_test::GuardedBuffer out(out_bytes), lse(lse_bytes);
    out.upload(c.out.data(), out_bytes);
    lse.upload(c.lse.data(), lse_bytes);
    dev.tensors.out.data = out.get();
    dev.tensors.lse.data = lse.get();
    dev.tensors.cu_seqlens_q_host = nullptr;
    dev.cu_seqlens_q.upload(bad_cu.data(), bad_cu.size() * sizeof(int32_t));
    DeviceBuffer workspace = gpu_test::poisoned_workspace(plan.workspace_bytes());
    ASSERT_TRUE(run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
    testing::check_cuda(cudaDeviceSynchronize(), "prefill");
    EXPECT_TRUE(out.guards_intact()) << "a write outside out, cu_seqlens_q[2] = " << bad_cu[2];
    EXPECT_TRUE(lse.guards_intact()) << "a write outside lse, cu_seqlens_q[2] = " << bad_cu[2];
    out.download(c.out.data(), out_bytes);
    // By the offsets the kernels read: the rows a bad sequence's offsets point at, clamped into the
    // tensor, are NaN; the rows of a valid sequence are not (where both claim a row, either may
    // win); rows no sequence claims are not the call's.
    const int64_t total = c.q_ref.shape[0];
    std::vector<int> claimed(size_t(total), 0);  // bit 0: a valid sequence's, bit 1: a bad one's
    for (int b = 0; b < 3; ++b) {
      const detail::VarlenRows rows = detail::varlen_rows(bad_cu.data(), b, total, p.max_q_len);
      for (int64_t t = rows.begin; t < rows.begin + rows.len; ++t) claimed[size_t(t)] |= rows.bad ? 2 : 1;
    }
    const std::vector<double> got = testing::dense_values(c.host_tensors().out);
    for (int64_t t = 0; t < total; ++t) {
      if (claimed[size_t(t)] != 1 && claimed[size_t(t)] != 2) continue;
      EXPECT_EQ(std::isnan(got[size_t(t) * 4 * 128]), claimed[size_t(t)] == 2)
          << "token " << t << ", cu_seqlens_q[2] = " << bad_cu[2];
    }
  }
}

// Item 5: a fused-merge plan runs in a workspace prepared for it; after another plan's call in that
// workspace (which overwrites its counters' memory) it is refused until prepared again.
TEST(PromisesGpu, FusedMergeNeedsItsOwnPreparedWorkspace) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c = testing::make_decode_case(DecodeSpecBuilder(2, 32, 8, 3000).paged(16).spec);
  PlanOptions o;
  o.num_splits = 4;
  Plan plain;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plain).ok());
  o.merge = Merge::kFused;
  Plan fused;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &fused).ok());
  SPLITKV_REQUIRE_PLAN_COMPILED(fused);
  DeviceDecodeCase dev(c);
  DeviceBuffer workspace = gpu_test::poisoned_workspace(std::max(plain.workspace_bytes(), fused.workspace_bytes()));
  EXPECT_EQ(run_decode(fused, dev.tensors, workspace.get(), workspace.bytes(), nullptr).argument(), "workspace");
  ASSERT_TRUE(prepare_workspace(fused, workspace.get(), workspace.bytes(), nullptr).ok());
  ASSERT_TRUE(run_decode(fused, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  ASSERT_TRUE(run_decode(fused, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  ASSERT_TRUE(run_decode(plain, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  EXPECT_EQ(run_decode(fused, dev.tensors, workspace.get(), workspace.bytes(), nullptr).argument(), "workspace");
  ASSERT_TRUE(prepare_workspace(fused, workspace.get(), workspace.bytes(), nullptr).ok());
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_TRUE(run_decode(fused, dev.tensors, workspace.get(), workspace.bytes(), nullptr).ok());
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << cmp.summary();
}

// Item 6: one kernel launched from two host threads with different shared-memory sizes (plans
// with and without even placement) never fails spuriously, and a graph captured with the larger
// size replays after eager calls with the smaller one.
TEST(PromisesGpu, ConcurrentLaunchesWithDifferentSharedMemorySizes) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  testing::DecodeCase c = testing::make_decode_case(DecodeSpecBuilder(4, 32, 8, 4096).paged(16).spec);
  Plan plans[2];
  PlanOptions o;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plans[0]).ok());
  o.tuning.even_placement = false;
  ASSERT_TRUE(plan_decode(c.problem, gpu_test::device(), o, &plans[1]).ok());
  if (plans[0].launch_smem_bytes() == 0) GTEST_SKIP() << "no even-placement size on this device: " << plans[0].note();
  SPLITKV_REQUIRE_PLAN_COMPILED(plans[0]);
  std::vector<std::thread> threads;
  int failures[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      testing::DecodeCase mine = c;
      DeviceDecodeCase dev(mine);
      DeviceBuffer workspace(plans[i].workspace_bytes());
      cudaStream_t stream;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      for (int call = 0; call < 200; ++call) {
        if (!run_decode(plans[i], dev.tensors, workspace.get(), workspace.bytes(), stream).ok()) ++failures[i];
      }
      if (cudaStreamSynchronize(stream) != cudaSuccess) ++failures[i];
      cudaStreamDestroy(stream);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures[0] + failures[1], 0);
  // Captured with the larger size, replayed after an eager call with the smaller one.
  DeviceDecodeCase dev(c);
  DeviceBuffer ws0(plans[0].workspace_bytes()), ws1(plans[1].workspace_bytes());
  const gpu_test::CapturedCall graph(
      [&](cudaStream_t stream) { return run_decode(plans[0], dev.tensors, ws0.get(), ws0.bytes(), stream); });
  ASSERT_TRUE(graph.ok()) << graph.error();
  ASSERT_TRUE(run_decode(plans[1], dev.tensors, ws1.get(), ws1.bytes(), graph.stream()).ok());
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_EQ(graph.replay(), cudaSuccess);
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_decode(c);
  EXPECT_TRUE(cmp.passed) << cmp.summary();
}

// Item 8: strides the TMA loads cannot take (K heads broadcast from one, stride 0) are refused by
// name for the sm_90a families and served by the mma.sync family; the strides of extent-1
// dimensions (a batch of one) are anything and still load by TMA.
TEST(PromisesGpu, StridesTmaCannotTakeAreRefusedByName) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  if (gpu_test::device().cc_major != 9) GTEST_SKIP() << "the TMA families need sm_90";
  testing::PrefillCaseSpec spec;
  PrefillProblem& p = spec.problem;
  p.batch = 1;
  p.num_q_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.max_q_len = 300;
  p.max_kv_len = 500;
  p.causal = true;
  testing::PrefillCase c = testing::make_prefill_case(spec);
  for (TensorRef* t : {&c.q_ref, &c.k_ref, &c.v_ref, &c.out_ref}) t->stride[0] = 0;  // one sequence: any stride
  Plan sm90;
  PlanOptions o;
  o.family = "prefill_sm90";
  ASSERT_TRUE(plan_prefill(c.problem, gpu_test::device(), o, &sm90).ok());
  SPLITKV_REQUIRE_PLAN_COMPILED(sm90);
  {
    testing::DevicePrefillCase dev(c);
    DeviceBuffer workspace(sm90.workspace_bytes());
    const Status s = run_prefill(sm90, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    dev.download_outputs(c);
    const testing::Comparison cmp = testing::check_prefill(c);
    EXPECT_TRUE(cmp.passed) << "batch stride 0 on one sequence: " << cmp.summary();
  }
  c.k_ref.stride[2] = 0;  // both KV heads read the same rows
  c.v_ref.stride[2] = 0;
  testing::DevicePrefillCase dev(c);
  DeviceBuffer workspace(sm90.workspace_bytes());
  const Status refused = run_prefill(sm90, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  EXPECT_EQ(refused.code(), StatusCode::kUnsupported) << refused.message();
  EXPECT_EQ(refused.argument(), "k.stride[2]") << refused.message();
  Plan mma;
  o.family = "prefill_mma";
  ASSERT_TRUE(plan_prefill(c.problem, gpu_test::device(), o, &mma).ok());
  DeviceBuffer mma_workspace(mma.workspace_bytes());
  testing::poison_outputs(c);
  dev.upload_outputs(c);
  ASSERT_TRUE(run_prefill(mma, dev.tensors, mma_workspace.get(), mma_workspace.bytes(), nullptr).ok());
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_prefill(c);
  EXPECT_TRUE(cmp.passed) << "broadcast K/V heads on prefill_mma: " << cmp.summary();
}

}  // namespace
}  // namespace splitkv
