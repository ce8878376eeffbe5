// The multi-GPU decode benchmark (docs/CONTEXT_SHARDS.md): B=1 and B=8 sequences, 32/8 heads,
// D=128, bf16, contexts of 16k..1M tokens (the short ones find where sharding stops paying), each sequence's keys split evenly over the ranks.
// Run one process per GPU: scripts/run_ranks.sh N LOG build/splitkv_dist_bench [--json FILE].
// Per row: one GPU over the whole context (rank 0, plain run_decode), the sharded call on N GPUs
// (run_sharded_decode) with NCCL all-gathers and with the peer merge, the local part alone (the
// shard's decode into partials; the slowest rank's), and the differences: exchange + merge. CUDA-graph replays; rank 0 prints the table and writes the JSON.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
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
  double symmetric_us;  // the sharded call with the peer merge (symmetric windows; 0: unavailable)
};

// The exchange alone, per design (CUDA-graph replays, no kernels of ours): what the merge step
// pays NCCL for, B x Hq rows with this rank's S split partials.
struct ExchangeRow {
  int batch, splits;
  double two_gathers_us, one_gather_us;  // O and LSE as two all-gathers in a group / one of both sizes
  double by_heads_us;  // the reduce-scatter-by-heads design's collectives: LSE all-gather, O
                       // reduce-scatter (one merged partial per rank), output all-gather
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

bool reported(const Status& s) {
  if (!s.ok()) std::fprintf(stderr, "splitkv_dist_bench: %s\n", s.message().c_str());
  return s.ok();
}

bool measure(const dist_tools::RankEnv& env, int batch, int context, Row* row) {
  DeviceInfo device;
  if (!query_device(env.rank, &device).ok()) return false;
  row->batch = batch, row->context = context, row->world = env.world;
  row->one_gpu_us = 0;
  if (env.rank == 0) {  // the other ranks wait for it in their first all-gather
    Cache whole(batch, context);
    Plan plan;
    if (!plan_decode(problem(batch, context), device, {}, &plan).ok()) return false;
    DeviceBuffer ws(plan.workspace_bytes());
    row->one_gpu_us = cli::time_graph([&](int, void* s) {
                        return run_decode(plan, whole.t, ws.get(), ws.bytes(), static_cast<Stream>(s)).ok();
                      }, 1, 20).us_per_call;
  }
  const int shard = context / env.world;
  Cache mine(batch, shard);
  dist::ShardedDecodePlan plan;
  if (!dist::plan_sharded_decode(problem(batch, shard), device, {}, env.world, &plan).ok()) return false;
  DeviceBuffer ws(plan.workspace_bytes);
  if (!reported(dist::check_plan_across_ranks(plan, env.comm))) return false;  // once, before the capture
  row->sharded_us = cli::time_graph([&](int, void* s) {
                      return reported(dist::run_sharded_decode(plan, mine.t, ws.get(), ws.bytes(), env.comm,
                                                               static_cast<Stream>(s)));
                    }, 1, 20).us_per_call;
  // The local part alone: the shard's decode into this rank's slot of the workspace.
  const int64_t S = plan.local.num_splits(), rows = batch;
  DecodeTensors local = mine.t;
  local.out = TensorRef{};
  local.partial_o = TensorRef::contiguous(ws.get(), DType::kF32, {S, rows, kHq, kD});
  local.partial_lse = TensorRef::contiguous(static_cast<char*>(ws.get()) + S * rows * kHq * kD * 4, DType::kF32,
                                            {S, rows, kHq});
  row->local_us = cli::time_graph([&](int, void* s) {
                    return reported(run_decode(plan.local, local, nullptr, 0, static_cast<Stream>(s)));
                  }, 1, 20).us_per_call;
  // The slowest rank's local part: the exchange waits for it, so only the rest is exchange + merge.
  {
    float slowest = float(row->local_us);
    DeviceBuffer v(sizeof(float));
    if (cudaMemcpy(v.get(), &slowest, sizeof slowest, cudaMemcpyHostToDevice) != cudaSuccess ||
        ncclAllReduce(v.get(), v.get(), 1, ncclFloat32, ncclMax, env.comm, nullptr) != ncclSuccess ||
        cudaMemcpy(&slowest, v.get(), sizeof slowest, cudaMemcpyDeviceToHost) != cudaSuccess) {
      return false;
    }
    row->local_us = slowest;
  }
  row->symmetric_us = 0;
  dist::SymmetricWorkspace sym;
  if (reported(dist::alloc_symmetric_workspace(plan, env.comm, &sym))) {
    row->symmetric_us = cli::time_graph([&](int, void* s) {
                          return reported(dist::run_sharded_decode(plan, mine.t, sym, env.comm, static_cast<Stream>(s)));
                        }, 1, 20).us_per_call;
    if (!dist::free_symmetric_workspace(env.comm, &sym).ok()) return false;
  }
  return true;
}

bool ok(ncclResult_t r) { return r == ncclSuccess; }

double time_collectives(const std::function<bool(cudaStream_t)>& enqueue) {
  return cli::time_graph([&](int, void* s) { return enqueue(static_cast<cudaStream_t>(s)); }, 1, 20).us_per_call;
}

bool measure_exchange(const dist_tools::RankEnv& env, int batch, int context, ExchangeRow* row) {
  DeviceInfo device;
  dist::ShardedDecodePlan plan;
  if (!query_device(env.rank, &device).ok() ||
      !dist::plan_sharded_decode(problem(batch, context / env.world), device, {}, env.world, &plan).ok()) {
    return false;
  }
  const size_t rows = size_t(batch) * kHq, S = size_t(plan.local.num_splits()), W = size_t(env.world);
  const size_t o = S * rows * kD, lse = S * rows;  // floats per rank
  row->batch = batch, row->splits = int(S);
  DeviceBuffer plain(plan.workspace_bytes);
  float* p = static_cast<float*>(plain.get());
  row->two_gathers_us = time_collectives([&](cudaStream_t st) {
    float* all_lse = p + W * o;
    return ok(ncclGroupStart()) && ok(ncclAllGather(p + env.rank * o, p, o, ncclFloat32, env.comm, st)) &&
           ok(ncclAllGather(all_lse + env.rank * lse, all_lse, lse, ncclFloat32, env.comm, st)) && ok(ncclGroupEnd());
  });
  row->one_gather_us = time_collectives([&](cudaStream_t st) {
    return ok(ncclAllGather(p + env.rank * (o + lse), p, o + lse, ncclFloat32, env.comm, st));
  });
  row->by_heads_us = time_collectives([&](cudaStream_t st) {
    const size_t merged = rows * kD, mine = merged / W;  // one merged fp32 partial; this rank's heads of it
    float* lse_all = p + merged;
    return ok(ncclAllGather(lse_all + env.rank * lse, lse_all, lse, ncclFloat32, env.comm, st)) &&
           ok(ncclReduceScatter(p, p + env.rank * mine, mine, ncclFloat32, ncclSum, env.comm, st)) &&
           ok(ncclAllGather(p + env.rank * mine / 2, p, mine / 2, ncclFloat32, env.comm, st));  // bf16 out
  });
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
  std::vector<ExchangeRow> exchanges;
  for (int batch : {1, 8}) {
    ExchangeRow x{};
    if (!measure_exchange(env, batch, 1048576, &x)) {
      std::fprintf(stderr, "rank %d: exchange B=%d failed\n", env.rank, batch);
      return 1;
    }
    exchanges.push_back(x);
  }
  if (env.rank != 0) return 0;
  std::printf("| B | context | GPUs | 1 GPU µs | sharded µs | speed-up | local µs | exchange + merge µs | "
              "peer merge µs | speed-up | its exchange + merge µs |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::string json = "{\"suite\": \"multigpu\", \"device\": \"" + cli::gpu_name() + "\", \"date\": \"" +
                     cli::today() + "\", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    char peer[96] = "| - | - | - |";  // no peer merge (one rank: NCCL makes no device communicator)
    if (r.symmetric_us > 0) {
      std::snprintf(peer, sizeof peer, "| %.1f | %.2f | %.1f |", r.symmetric_us, r.one_gpu_us / r.symmetric_us,
                    r.symmetric_us - r.local_us);
    }
    std::printf("| %d | %d | %d | %.1f | %.1f | %.2f | %.1f | %.1f %s\n", r.batch, r.context, r.world, r.one_gpu_us,
                r.sharded_us, r.one_gpu_us / r.sharded_us, r.local_us, r.sharded_us - r.local_us, peer);
    // The results format of docs/BENCHMARKING.md: case, our µs per call, and the multigpu fields.
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"case\": {\"B\": %d, \"Hq\": %d, \"Hkv\": %d, \"Lq\": 1, \"Lk\": %d, \"D\": %d, "
                  "\"dtype\": \"bf16\", \"gpus\": %d}, \"us\": %.2f, \"one_gpu_us\": %.2f, "
                  "\"speedup_vs_1gpu\": %.3f, \"local_us\": %.2f, \"merge_us\": %.2f, \"symmetric_us\": %.2f}",
                  i ? ", " : "", r.batch, kHq, kHkv, r.context, kD, r.world, r.sharded_us, r.one_gpu_us,
                  r.one_gpu_us / r.sharded_us, r.local_us, r.sharded_us - r.local_us, r.symmetric_us);
    json += buf;
  }
  json += "], \"exchange\": [";
  std::printf("\n| B | splits per rank | GPUs | 2 all-gathers µs | 1 all-gather µs | by heads (3 collectives) µs |\n"
              "|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < exchanges.size(); ++i) {
    const ExchangeRow& x = exchanges[i];
    std::printf("| %d | %d | %d | %.1f | %.1f | %.1f |\n", x.batch, x.splits, env.world, x.two_gathers_us,
                x.one_gather_us, x.by_heads_us);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s{\"B\": %d, \"splits_per_rank\": %d, \"gpus\": %d, \"two_gathers_us\": %.2f, "
                  "\"one_gather_us\": %.2f, \"by_heads_us\": %.2f}",
                  i ? ", " : "", x.batch, x.splits, env.world, x.two_gathers_us, x.one_gather_us, x.by_heads_us);
    json += buf;
  }
  json += "]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}
