// `splitkv verify` and `splitkv bench` for decode on the GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "commands.hpp"
#include "gpu_timing.hpp"
#include "problem_builder.hpp"
#include "testing/decode_check.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {
namespace {

using testing::DeviceBuffer;

// The decode suite of BENCHMARKING.md: bf16, D=128, one query per sequence.
struct SuiteRow {
  int batch, kv_len, num_q_heads, num_kv_heads;
};
const SuiteRow kDecodeSuite[] = {{1, 1024, 32, 8},   {1, 4096, 32, 8},  {1, 16384, 32, 8}, {1, 65536, 32, 8},
                                 {1, 131072, 32, 8}, {8, 8192, 32, 8},  {8, 32768, 32, 8}, {32, 4096, 32, 8},
                                 {64, 2048, 32, 8},  {128, 1024, 32, 8}, {1, 32768, 32, 32}, {4, 32768, 64, 8}};

// One set of inputs and outputs on the device; benchmarks rotate over several (cold L2).
struct DecodeSet {
  DeviceBuffer q, k, v, out, seq_lens, block_table;
  DecodeTensors tensors;
};

DecodeSet make_set(const DecodeProblem& p, uint64_t seed) {
  const int64_t B = p.batch, Lq = p.q_len, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  DecodeSet s;
  const int64_t pages_per_seq = p.page_size ? (p.max_kv_len + p.page_size - 1) / p.page_size : 0;
  const int64_t slabs = p.page_size ? B * pages_per_seq : B;
  const int64_t slab_tokens = p.page_size ? p.page_size : p.max_kv_len;
  const size_t kv_elems = size_t(slabs * slab_tokens * Hkv * D), q_elems = size_t(B * Lq * Hq * D);
  s.q = DeviceBuffer(q_elems * 2);
  s.out = DeviceBuffer(q_elems * 2);
  s.k = DeviceBuffer(kv_elems * 2);
  s.v = DeviceBuffer(kv_elems * 2);
  fill_random_device(s.q.get(), q_elems, p.dtype, seed);
  fill_random_device(s.k.get(), kv_elems, p.dtype, seed + 1);
  fill_random_device(s.v.get(), kv_elems, p.dtype, seed + 2);
  s.seq_lens = DeviceBuffer::from(std::vector<int32_t>(size_t(B), p.max_kv_len));
  s.tensors.q = TensorRef::contiguous(s.q.get(), p.dtype, {B, Lq, Hq, D});
  s.tensors.out = TensorRef::contiguous(s.out.get(), p.dtype, {B, Lq, Hq, D});
  s.tensors.k = TensorRef::contiguous(s.k.get(), p.dtype, {slabs, slab_tokens, Hkv, D});
  s.tensors.v = TensorRef::contiguous(s.v.get(), p.dtype, {slabs, slab_tokens, Hkv, D});
  s.tensors.seq_lens = TensorRef::contiguous(s.seq_lens.get(), DType::kI32, {B});
  if (p.page_size) {
    std::vector<int32_t> table(static_cast<size_t>(slabs));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937_64(seed));
    s.block_table = DeviceBuffer::from(table);
    s.tensors.block_table = TensorRef::contiguous(s.block_table.get(), DType::kI32, {B, pages_per_seq});
  }
  return s;
}

struct DecodeMeasurement {
  DecodeProblem problem;
  Plan plan;
  GraphTiming timing;
  double bytes = 0;  // K + V + Q + O
  double flops = 0;
};

Status measure_decode(const DecodeProblem& p, const PlanOptions& options, DecodeMeasurement* m) {
  DeviceInfo device;
  if (Status s = query_device(0, &device); !s) return s;
  m->problem = p;
  if (Status s = plan_decode(p, device, options, &m->plan); !s) return s;
  const double kv_bytes = 2.0 * p.batch * double(p.max_kv_len) * p.num_kv_heads * p.head_dim * 2;
  const double qo_bytes = 2.0 * p.batch * p.q_len * p.num_q_heads * p.head_dim * 2;
  m->bytes = kv_bytes + qo_bytes;
  m->flops = 4.0 * p.batch * p.num_q_heads * p.q_len * double(p.max_kv_len) * p.head_dim;
  // Enough sets that one replay streams >= 1 GiB: every call starts with a cold L2.
  const int sets = int(std::clamp(std::ceil(double(1ll << 30) / m->bytes), 1.0, 64.0));
  std::vector<DecodeSet> data;
  for (int i = 0; i < sets; ++i) data.push_back(make_set(p, 100 + 3 * i));
  DeviceBuffer workspace(m->plan.workspace_bytes);
  Status status;
  auto enqueue = [&](int call, void* stream) {
    status = run_decode(m->plan, data[call % sets].tensors, workspace.get(), workspace.bytes(),
                        static_cast<Stream>(stream));
    return status.ok();
  };
  const int calls = sets * std::max(1, (32 + sets - 1) / sets);
  try {
    m->timing = time_graph(enqueue, calls);
  } catch (const std::exception& e) {
    return status.ok() ? Status(StatusCode::kCudaError, "", e.what()) : status;
  }
  return Status::success();
}

std::string case_json(const DecodeMeasurement& m) {
  const DecodeProblem& p = m.problem;
  std::ostringstream s;
  s << "{\"B\": " << p.batch << ", \"Hq\": " << p.num_q_heads << ", \"Hkv\": " << p.num_kv_heads
    << ", \"Lq\": " << p.q_len << ", \"Lk\": " << p.max_kv_len << ", \"D\": " << p.head_dim << ", \"dtype\": \""
    << to_string(p.dtype) << "\", \"causal\": " << (p.causal ? "true" : "false") << ", \"page_size\": " << p.page_size
    << ", \"strategy\": \"" << to_string(m.plan.strategy) << "\", \"splits\": " << m.plan.num_splits << "}";
  return s.str();
}

void print_row(const DecodeMeasurement& m, double ceiling_gbps) {
  const DecodeProblem& p = m.problem;
  const double gbps = m.bytes / (m.timing.us_per_call * 1e-6) / 1e9;
  std::printf("%4d %7d %3d/%-3d %4d %5d %8.2f %8.0f %6.1f%% %6.1f%%\n", p.batch, p.max_kv_len, p.num_q_heads,
              p.num_kv_heads, p.page_size, m.plan.num_splits, m.timing.us_per_call, gbps,
              100.0 * gbps / ceiling_gbps, 100.0 * m.timing.spread);
}

const char* kHeader = "   B      Lk  Hq/Hkv  page splits       us     GB/s  ceil%  spread\n";

int run_decode_rows(const std::vector<DecodeProblem>& problems, const std::vector<PlanOptions>& options,
                    const CliOptions& o, const char* suite) {
  std::printf("measuring the read-bandwidth ceiling (4 GiB plain read kernel)...\n");
  const double ceiling = measure_read_ceiling_gbps();
  std::printf("read ceiling: %.0f GB/s on %s\n%s", ceiling, gpu_name().c_str(), kHeader);
  std::ostringstream rows;
  int failures = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    DecodeMeasurement m;
    if (Status s = measure_decode(problems[i], options[i], &m); !s) {
      std::printf("  %s\n", s.message().c_str());
      ++failures;
      continue;
    }
    print_row(m, ceiling);
    std::fflush(stdout);
    const double gbps = m.bytes / (m.timing.us_per_call * 1e-6) / 1e9;
    rows << (rows.tellp() > 0 ? ",\n  " : "  ") << "{\"case\": " << case_json(m) << ", \"us\": " << m.timing.us_per_call
         << ", \"gbps\": " << gbps << ", \"tflops\": " << m.flops / (m.timing.us_per_call * 1e-6) / 1e12
         << ", \"spread\": " << m.timing.spread << "}";
  }
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    const char* commit = std::getenv("SPLITKV_COMMIT");
    json << "{\"suite\": \"" << suite << "\", \"date\": \"" << today() << "\", \"gpu\": \"" << gpu_name()
         << "\", \"commit\": \"" << (commit ? commit : "unknown") << "\", \"ceiling_read_gbps\": " << ceiling
         << ",\n \"rows\": [\n" << rows.str() << "]}\n";
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int gpu_decode_bench(const CliOptions& o) {
  DType dtype;
  PlanOptions options;
  if (!parse_dtype_and_options(o, &dtype, &options)) return 1;
  std::vector<DecodeProblem> problems;
  std::vector<PlanOptions> plan_options;
  if (o.suite == "sweep") {
    // Every split count on every suite row: the data the split heuristic is tuned from.
    for (const SuiteRow& r : kDecodeSuite) {
      for (int splits : {0, 1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
        CliOptions row = o;
        row.batch = r.batch, row.kv_len = r.kv_len, row.num_q_heads = r.num_q_heads, row.num_kv_heads = r.num_kv_heads;
        problems.push_back(to_decode_problem(row, dtype));
        PlanOptions po = options;
        po.num_splits = splits;
        plan_options.push_back(po);
      }
    }
    return run_decode_rows(problems, plan_options, o, "decode-sweep");
  }
  if (o.shape_given) {
    problems.push_back(to_decode_problem(o, dtype));
    plan_options.push_back(options);
    return run_decode_rows(problems, plan_options, o, "decode-single");
  }
  for (const SuiteRow& r : kDecodeSuite) {
    CliOptions row = o;
    row.batch = r.batch, row.kv_len = r.kv_len, row.num_q_heads = r.num_q_heads, row.num_kv_heads = r.num_kv_heads;
    problems.push_back(to_decode_problem(row, dtype));
    plan_options.push_back(options);
  }
  return run_decode_rows(problems, plan_options, o, "decode");
}

int gpu_decode_verify(const CliOptions& o) {
  DType dtype;
  PlanOptions options;
  if (!parse_dtype_and_options(o, &dtype, &options)) return 1;
  testing::DecodeCaseSpec spec;
  spec.problem = to_decode_problem(o, dtype);
  spec.seed = o.seed;
  DeviceInfo device;
  Plan plan;
  Status status = query_device(0, &device);
  if (status) status = plan_decode(spec.problem, device, options, &plan);
  if (!status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  testing::DecodeCase c = testing::make_decode_case(spec);
  testing::DeviceDecodeCase dev(c);
  DeviceBuffer workspace(plan.workspace_bytes);
  status = run_decode(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  if (!status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_decode(c);
  std::printf("%s", describe(plan).c_str());
  std::printf("gpu decode vs fp64 reference: %s\n", cmp.summary().c_str());
  return cmp.passed ? 0 : 1;
}

}  // namespace splitkv::cli
