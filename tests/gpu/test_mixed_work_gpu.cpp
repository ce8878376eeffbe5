// The mixed step's work-list builder on the GPU (kernels/mixed/mixed_work_kernel.cuh): from the
// device's cu_seqlens_q and seq_lens, one block writes the list the host's plan::mixed_work_list
// makes, unit for unit, over random mixes (empty rows, decode and speculative rows, chunks of up to
// 3000 queries, prefixes up to 128k, more sequences than the block has threads) and bad lengths;
// past the list nothing is written (the buffer's poison stays); lengths that would overflow the
// plan's bound give count -1 and no write past the capacity; a graph captured once rebuilds the
// list for new lengths on each replay.
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernels/mixed/mixed_work_params.hpp"
#include "launch/dispatch.hpp"
#include "plan/mixed_work_list.hpp"
#include "testing/mixed_batch.hpp"

namespace splitkv {
namespace {

using detail::MixedShape;
using detail::MixedUnit;
using testing::DeviceBuffer;
using testing::MixedBatch;

MixedShape shape(int max_seqs, int max_tokens, int max_kv_len) {
  return testing::mixed_test_shape(max_seqs, max_tokens, max_kv_len);
}

bool same_unit(const MixedUnit& a, const MixedUnit& b) { return std::memcmp(&a, &b, sizeof(MixedUnit)) == 0; }

// The builder's buffers for one shape: lengths sized for max_seqs, the list for its bound (plus
// a poisoned guard of one unit past it), the count.
struct Builder {
  MixedShape shape;
  int64_t capacity;
  DeviceBuffer cu_q, lens, units, count;
  detail::Launcher launcher{};

  explicit Builder(const MixedShape& s)
      : shape(s),
        capacity(plan::mixed_max_units(s)),
        cu_q(sizeof(int32_t) * (s.max_seqs + 1)),
        lens(sizeof(int32_t) * s.max_seqs),
        units(sizeof(MixedUnit) * (capacity + 1)),
        count(sizeof(int64_t)) {
    EXPECT_TRUE(detail::find_launcher("mixed_work", DType::kBF16, 128, &launcher).ok());
  }
  void upload(const MixedBatch& b) {
    cu_q.upload(b.cu_q.data(), sizeof(int32_t) * b.cu_q.size());
    lens.upload(b.lens.data(), sizeof(int32_t) * b.lens.size());
    units.fill_bytes(0xff);
    count.fill_bytes(0xff);
  }
  detail::MixedWorkParams params(int batch) const {
    detail::MixedWorkParams p;
    p.shape = shape;
    p.cu_seqlens_q = static_cast<const int32_t*>(cu_q.get());
    p.seq_lens = static_cast<const int32_t*>(lens.get());
    p.batch = batch;
    p.units = static_cast<MixedUnit*>(units.get());
    p.capacity = capacity;
    p.count = static_cast<int64_t*>(count.get());
    return p;
  }
  Status launch(int batch, cudaStream_t stream) const {
    const detail::MixedWorkParams p = params(batch);
    detail::LaunchConfig config;
    config.stream = stream;
    return detail::launch(launcher, &p, config, "mixed work list launch");
  }
  // The device's count and its whole buffer (capacity + 1 units).
  int64_t downloaded(std::vector<MixedUnit>* list) const {
    int64_t n = 0;
    count.download(&n, sizeof(n));
    list->resize(size_t(capacity + 1));
    units.download(list->data(), sizeof(MixedUnit) * list->size());
    return n;
  }
};

// The device list equals the host's, and every unit past it keeps its poison.
void expect_host_list(const Builder& builder, const MixedBatch& batch, const std::string& what) {
  const std::vector<MixedUnit> host =
      plan::mixed_work_list(builder.shape, batch.cu_q.data(), batch.lens.data(), batch.size());
  std::vector<MixedUnit> device;
  const int64_t n = builder.downloaded(&device);
  ASSERT_EQ(n, int64_t(host.size())) << what;
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_TRUE(same_unit(device[i], host[i])) << what << ": unit " << i << " of " << host.size();
  }
  MixedUnit poison;
  std::memset(&poison, 0xff, sizeof(poison));
  for (size_t i = host.size(); i < device.size(); ++i) {
    ASSERT_TRUE(same_unit(device[i], poison)) << what << ": unit " << i << " written past the list";
  }
}

TEST(MixedWorkGpu, TheDeviceListIsTheHostListOnRandomMixes) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  std::mt19937 rng(11);
  for (const MixedShape& s : {shape(64, 8192, 131072), shape(3000, 65536, 32768)}) {
    Builder builder(s);
    for (int trial = 0; trial < 40; ++trial) {
      const MixedBatch batch = testing::random_mixed_batch(rng, s);
      builder.upload(batch);
      ASSERT_TRUE(builder.launch(batch.size(), nullptr).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_host_list(builder, batch, "max_seqs " + std::to_string(s.max_seqs) + " trial " + std::to_string(trial));
    }
  }
}

TEST(MixedWorkGpu, BadLengthsAndAnOverflowingStep) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  const MixedShape s = shape(8, 1000, 5000);
  Builder builder(s);
  // fine; q_len > n; n > max_kv_len; a negative q_len; queries past max_tokens (twice).
  MixedBatch bad;
  bad.cu_q = {0, 4, 14, 20, 18, 1200, 1200};
  bad.lens = {100, 5, 6000, 50, 2000, 300};
  builder.upload(bad);
  ASSERT_TRUE(builder.launch(bad.size(), nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_host_list(builder, bad, "bad lengths");

  // Query ranges that overlap (a negative q_len between two full ones): each chunk is valid alone,
  // together they make more tiles than the bound (one split per decode row: the bound is tight).
  // Count -1, nothing past the capacity.
  MixedShape tight = s;
  tight.max_splits = 1;
  Builder bounded(tight);
  MixedBatch overflow;
  overflow.cu_q = {0, 1000, 0, 1000, 0, 1000, 0, 1000, 0};
  overflow.lens = {1000, 1, 1000, 1, 1000, 1, 1000, 1};
  const std::vector<MixedUnit> host = plan::mixed_work_list(tight, overflow.cu_q.data(), overflow.lens.data(), 8);
  ASSERT_GT(int64_t(host.size()), bounded.capacity) << "the case must overflow the bound";
  bounded.upload(overflow);
  ASSERT_TRUE(bounded.launch(overflow.size(), nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<MixedUnit> device;
  EXPECT_EQ(bounded.downloaded(&device), -1);
  MixedUnit poison;
  std::memset(&poison, 0xff, sizeof(poison));
  EXPECT_TRUE(same_unit(device.back(), poison)) << "a unit written past the capacity";
}

TEST(MixedWorkGpu, OneCapturedGraphRebuildsTheListForNewLengths) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  const MixedShape s = shape(64, 8192, 131072);
  Builder builder(s);
  std::mt19937 rng(5);
  const MixedBatch first = testing::random_mixed_batch(rng, s);
  // The graph is captured for max_seqs sequences; a step of fewer pads with empty ones.
  auto padded = [&](MixedBatch b) {
    while (b.size() < s.max_seqs) {
      b.cu_q.push_back(b.cu_q.back());
      b.lens.push_back(0);
    }
    return b;
  };
  builder.upload(padded(first));
  gpu_test::CapturedCall graph([&](cudaStream_t stream) { return builder.launch(s.max_seqs, stream); });
  ASSERT_TRUE(graph.ok()) << graph.error();
  for (int replay = 0; replay < 5; ++replay) {
    const MixedBatch batch = padded(replay == 0 ? first : testing::random_mixed_batch(rng, s));
    builder.upload(batch);
    ASSERT_EQ(graph.replay(), cudaSuccess);
    expect_host_list(builder, batch, "replay " + std::to_string(replay));
  }
}

}  // namespace
}  // namespace splitkv
