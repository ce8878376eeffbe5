// The multi-GPU decode benchmark (docs/CONTEXT_SHARDS.md): B=1 and B=8 sequences, 32/8 heads,
// D=128, bf16, contexts of 16k..1M tokens (the short ones find where sharding stops paying), each sequence's keys split evenly over the ranks.
// Run one process per GPU: scripts/run_ranks.sh N LOG build/splitkv_dist_bench [--json FILE].
// Per row: one GPU over the whole context (rank 0, plain run_decode), the sharded call on N GPUs
// (run_sharded_decode), its local part alone (the shard's decode into partials), and the
// difference: exchange + merge. CUDA-graph replays; rank 0 prints the table and writes the JSON.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "dist_rank.hpp"
#include "gpu_timing.hpp"
#include "splitkv/dist.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

constexpr int kHq = 32, kHkv = 8, kD = 128;

struct Row {
  int batch, context, world;
  double one_gpu_us, sharded_us, local_us;
};

DecodeProblem problem(int batch, int max_len) {
  DecodeProblem p;
  p.batch = batch;
  p.num_q_heads = kHq;
  p.num_kv_heads = kHkv;
  p.head_dim = kD;
  p.max_kv_len = max_len;
  return p;
}

// A contiguous cache of `len` keys per sequence, random bf16, with its query and output.
struct Cache {
  DeviceBuffer q, k, v, out, lens;
  DecodeTensors t;
  Cache(int batch, int len) : q(size_t(batch) * kHq * kD * 2), k(size_t(batch) * len * kHkv * kD * 2),
                              v(k.bytes()), out(q.bytes()), lens(DeviceBuffer::from(std::vector<int32_t>(size_t(batch), len))) {
    cli::fill_random_device(q.get(), q.bytes() / 2, DType::kBF16, 1);
    cli::fill_random_device(k.get(), k.bytes() / 2, DType::kBF16, 2);
    cli::fill_random_device(v.get(), v.bytes() / 2, DType::kBF16, 3);
    t.q = TensorRef::contiguous(q.get(), DType::kBF16, {batch, 1, kHq, kD});
    t.k = TensorRef::contiguous(k.get(), DType::kBF16, {batch, len, kHkv, kD});
    t.v = TensorRef::contiguous(v.get(), DType::kBF16, {batch, len, kHkv, kD});
    t.seq_lens = TensorRef::contiguous(lens.get(), DType::kI32, {batch});
    t.out = TensorRef::contiguous(out.get(), DType::kBF16, {batch, 1, kHq, kD});
  }
};

bool measure(const dist_tools::RankEnv& env, int batch, int context, Row* row) {
  DeviceInfo device;
  if (!query_device(env.rank, &device).ok()) return false;
  row->batch = batch, row->context = context, row->world = env.world;
  row->one_gpu_us = 0;
  if (env.rank == 0) {  // the other ranks wait for it in their first all-gather
    Cache whole(batch, context);
    Plan plan;
    if (!plan_decode(problem(batch, context), device, {}, &plan).ok()) return false;
    DeviceBuffer ws(plan.workspace_bytes);
    row->one_gpu_us = cli::time_graph([&](int, void* s) {
                        return run_decode(plan, whole.t, ws.get(), ws.bytes(), static_cast<Stream>(s)).ok();
                      }, 1, 20).us_per_call;
  }
  const int shard = context / env.world;
  Cache mine(batch, shard);
  dist::ShardedDecodePlan plan;
  if (!dist::plan_sharded_decode(problem(batch, shard), device, {}, env.world, &plan).ok()) return false;
  DeviceBuffer ws(plan.workspace_bytes);
  row->sharded_us = cli::time_graph([&](int, void* s) {
                      return dist::run_sharded_decode(plan, mine.t, ws.get(), ws.bytes(), env.comm,
                                                      static_cast<Stream>(s)).ok();
                    }, 1, 20).us_per_call;
  // The local part alone: the shard's decode into this rank's slot of the workspace.
  const int64_t S = plan.local.num_splits, rows = batch;
  DecodeTensors local = mine.t;
  local.out = TensorRef{};
  local.partial_o = TensorRef::contiguous(ws.get(), DType::kF32, {S, rows, kHq, kD});
  local.partial_lse = TensorRef::contiguous(static_cast<char*>(ws.get()) + S * rows * kHq * kD * 4, DType::kF32,
                                            {S, rows, kHq});
  row->local_us = cli::time_graph([&](int, void* s) {
                    return run_decode(plan.local, local, nullptr, 0, static_cast<Stream>(s)).ok();
                  }, 1, 20).us_per_call;
  return true;
}

}  // namespace
}  // namespace splitkv

int main(int argc, char** argv) {
  using namespace splitkv;
  std::string json_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  }
  const dist_tools::RankEnv env = dist_tools::join_ranks();
  if (!env.error.empty()) {
    std::fprintf(stderr, "splitkv_dist_bench: %s\n", env.error.c_str());
    return 2;
  }
  std::vector<Row> rows;
  for (int batch : {1, 8}) {
    for (int context : {16384, 32768, 65536, 131072, 262144, 524288, 1048576}) {
      Row r{};
      if (!measure(env, batch, context, &r)) {
        std::fprintf(stderr, "rank %d: B=%d context=%d failed\n", env.rank, batch, context);
        return 1;
      }
      rows.push_back(r);
    }
  }
  if (env.rank != 0) return 0;
  std::printf("| B | context | GPUs | 1 GPU µs | sharded µs | speed-up | local µs | exchange + merge µs |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::string json = "{\"suite\": \"multigpu\", \"device\": \"" + cli::gpu_name() + "\", \"date\": \"" +
                     cli::today() + "\", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("| %d | %d | %d | %.1f | %.1f | %.2f | %.1f | %.1f |\n", r.batch, r.context, r.world, r.one_gpu_us,
                r.sharded_us, r.one_gpu_us / r.sharded_us, r.local_us, r.sharded_us - r.local_us);
    // The results format of docs/BENCHMARKING.md: case, our µs per call, and the multigpu fields.
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"case\": {\"B\": %d, \"Hq\": %d, \"Hkv\": %d, \"Lq\": 1, \"Lk\": %d, \"D\": %d, "
                  "\"dtype\": \"bf16\", \"gpus\": %d}, \"us\": %.2f, \"one_gpu_us\": %.2f, "
                  "\"speedup_vs_1gpu\": %.3f, \"local_us\": %.2f, \"merge_us\": %.2f}",
                  i ? ", " : "", r.batch, kHq, kHkv, r.context, kD, r.world, r.sharded_us, r.one_gpu_us,
                  r.one_gpu_us / r.sharded_us, r.local_us, r.sharded_us - r.local_us);
    json += buf;
  }
  json += "]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}
