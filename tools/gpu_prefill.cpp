// `splitkv verify` and `splitkv bench` for prefill on the GPU (suites: prefill, strategies).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "commands.hpp"
#include "gpu_timing.hpp"
#include "problem_builder.hpp"
#include "testing/device_buffer.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv::cli {
namespace {

using testing::DeviceBuffer;

// The prefill table of BENCHMARKING.md (Hq = Hkv).
struct SuiteRow {
  int batch, heads, len, head_dim;
  DType dtype;
  bool causal;
};
const SuiteRow kPrefillSuite[] = {
    {4, 12, 1024, 64, DType::kF16, false},   {4, 12, 4096, 64, DType::kF16, false},
    {4, 12, 8192, 64, DType::kF16, false},   {2, 12, 16384, 64, DType::kF16, false},
    {16, 16, 1024, 128, DType::kBF16, false}, {4, 16, 4096, 128, DType::kBF16, false},
    {1, 16, 16384, 128, DType::kBF16, false}, {16, 16, 1024, 128, DType::kBF16, true},
    {4, 16, 4096, 128, DType::kBF16, true},  {1, 16, 16384, 128, DType::kBF16, true}};

struct StrategyChoice {
  const char* name;
  Strategy strategy;
  TileShape tiles;
};
const StrategyChoice kStrategies[] = {{"default", Strategy::kAuto, TileShape::kDefault},
                                      {"split-v", Strategy::kSplitV, TileShape::kDefault},
                                      {"two-pass", Strategy::kTwoPass, TileShape::kDefault},
                                      {"founding-tiles", Strategy::kAuto, TileShape::kFoundingNotes}};

struct PrefillSet {
  DeviceBuffer q, k, v, out;
  PrefillTensors tensors;
};

PrefillSet make_set(const PrefillProblem& p, uint64_t seed) {
  const int64_t B = p.batch, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  const size_t q_elems = size_t(B * p.max_q_len * Hq * D), kv_elems = size_t(B * p.max_kv_len * Hkv * D);
  PrefillSet s;
  s.q = DeviceBuffer(q_elems * 2);
  s.out = DeviceBuffer(q_elems * 2);
  s.k = DeviceBuffer(kv_elems * 2);
  s.v = DeviceBuffer(kv_elems * 2);
  fill_random_device(s.q.get(), q_elems, p.dtype, seed);
  fill_random_device(s.k.get(), kv_elems, p.dtype, seed + 1);
  fill_random_device(s.v.get(), kv_elems, p.dtype, seed + 2);
  s.tensors.q = TensorRef::contiguous(s.q.get(), p.dtype, {B, p.max_q_len, Hq, D});
  s.tensors.out = TensorRef::contiguous(s.out.get(), p.dtype, {B, p.max_q_len, Hq, D});
  s.tensors.k = TensorRef::contiguous(s.k.get(), p.dtype, {B, p.max_kv_len, Hkv, D});
  s.tensors.v = TensorRef::contiguous(s.v.get(), p.dtype, {B, p.max_kv_len, Hkv, D});
  return s;
}

struct PrefillMeasurement {
  PrefillProblem problem;
  Plan plan;
  GraphTiming timing;
  double flops = 0;
};

Status measure_prefill(const PrefillProblem& p, const PlanOptions& options, PrefillMeasurement* m) {
  DeviceInfo device;
  if (Status s = query_device(0, &device); !s) return s;
  m->problem = p;
  if (Status s = plan_prefill(p, device, options, &m->plan); !s) return s;
  m->flops = 4.0 * p.batch * p.num_q_heads * double(p.max_q_len) * p.max_kv_len * p.head_dim * (p.causal ? 0.5 : 1.0);
  const double bytes = 2.0 * p.batch * p.head_dim * (2.0 * p.max_q_len * p.num_q_heads + 2.0 * p.max_kv_len * p.num_kv_heads);
  const int sets = int(std::clamp(std::ceil(double(1ll << 30) / bytes), 1.0, 16.0));
  std::vector<PrefillSet> data;
  for (int i = 0; i < sets; ++i) data.push_back(make_set(p, 500 + 3 * i));
  DeviceBuffer workspace(m->plan.workspace_bytes);
  Status status;
  auto enqueue = [&](int call, void* stream) {
    status = run_prefill(m->plan, data[call % sets].tensors, workspace.get(), workspace.bytes(),
                         static_cast<Stream>(stream));
    return status.ok();
  };
  try {
    m->timing = time_graph(enqueue, sets * std::max(1, (8 + sets - 1) / sets), 20);
  } catch (const std::exception& e) {
    return status.ok() ? Status(StatusCode::kCudaError, "", e.what()) : status;
  }
  return Status::success();
}

std::string case_json(const PrefillMeasurement& m, const char* variant) {
  const PrefillProblem& p = m.problem;
  std::ostringstream s;
  s << "{\"B\": " << p.batch << ", \"Hq\": " << p.num_q_heads << ", \"Hkv\": " << p.num_kv_heads
    << ", \"Lq\": " << p.max_q_len << ", \"Lk\": " << p.max_kv_len << ", \"D\": " << p.head_dim << ", \"dtype\": \""
    << to_string(p.dtype) << "\", \"causal\": " << (p.causal ? "true" : "false")
    << ", \"page_size\": 0, \"strategy\": \"" << to_string(m.plan.strategy) << "\", \"variant\": \"" << variant
    << "\", \"splits\": " << m.plan.num_splits << "}";
  return s.str();
}

PrefillProblem row_problem(const SuiteRow& r) {
  PrefillProblem p;
  p.batch = r.batch;
  p.num_q_heads = p.num_kv_heads = r.heads;
  p.head_dim = r.head_dim;
  p.max_q_len = p.max_kv_len = r.len;
  p.causal = r.causal;
  p.dtype = r.dtype;
  return p;
}

int run_rows(const std::vector<PrefillProblem>& problems, const std::vector<StrategyChoice>& variants,
             const CliOptions& o, const char* suite) {
  std::printf("%4s %3s %6s %4s %5s %7s %-15s %6s %9s %8s %7s\n", "B", "H", "L", "D", "dtype", "causal", "variant",
              "splits", "us", "TFLOP/s", "spread");
  std::ostringstream rows;
  int failures = 0;
  for (const PrefillProblem& p : problems) {
    for (const StrategyChoice& v : variants) {
      PlanOptions options;
      if (Status s = to_plan_options(o, &options); !s) return 1;
      options.strategy = v.strategy == Strategy::kAuto ? options.strategy : v.strategy;
      options.tiles = v.tiles == TileShape::kDefault ? options.tiles : v.tiles;
      PrefillMeasurement m;
      if (Status s = measure_prefill(p, options, &m); !s) {
        std::printf("  %s: %s\n", v.name, s.message().c_str());
        ++failures;
        continue;
      }
      const double tflops = m.flops / (m.timing.us_per_call * 1e-6) / 1e12;
      std::printf("%4d %3d %6d %4d %5s %7s %-15s %6d %9.1f %8.1f %6.1f%%\n", p.batch, p.num_q_heads, p.max_q_len,
                  p.head_dim, to_string(p.dtype), p.causal ? "yes" : "no", v.name, m.plan.num_splits,
                  m.timing.us_per_call, tflops, 100 * m.timing.spread);
      std::fflush(stdout);
      rows << (rows.tellp() > 0 ? ",\n  " : "  ") << "{\"case\": " << case_json(m, v.name)
           << ", \"us\": " << m.timing.us_per_call << ", \"tflops\": " << tflops << ", \"spread\": " << m.timing.spread
           << "}";
    }
  }
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    const char* commit = std::getenv("SPLITKV_COMMIT");
    json << "{\"suite\": \"" << suite << "\", \"date\": \"" << today() << "\", \"gpu\": \"" << gpu_name()
         << "\", \"commit\": \"" << (commit ? commit : "unknown") << "\",\n \"rows\": [\n" << rows.str() << "]}\n";
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int gpu_prefill_bench(const CliOptions& o) {
  std::vector<PrefillProblem> problems;
  if (o.shape_given) {
    DType dtype;
    if (Status s = to_dtype(o.dtype, &dtype); !s) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    problems.push_back(to_prefill_problem(o, dtype));
  } else {
    for (const SuiteRow& r : kPrefillSuite) problems.push_back(row_problem(r));
  }
  if (o.suite == "strategies") {
    return run_rows(problems, std::vector<StrategyChoice>(std::begin(kStrategies), std::end(kStrategies)), o,
                    "strategies");
  }
  return run_rows(problems, {kStrategies[0]}, o, o.shape_given ? "prefill-single" : "prefill");
}

int gpu_prefill_verify(const CliOptions& o) {
  DType dtype;
  PlanOptions options;
  if (!parse_dtype_and_options(o, &dtype, &options)) return 1;
  testing::PrefillCaseSpec spec;
  spec.problem = to_prefill_problem(o, dtype);
  spec.seed = o.seed;
  if (spec.problem.varlen) {  // lengths from the bound down, so sequences differ
    for (int b = 0; b < spec.problem.batch; ++b) {
      spec.q_lens.push_back(std::max(0, spec.problem.max_q_len - 7 * b));
      spec.kv_lens.push_back(std::max(0, spec.problem.max_kv_len - 5 * b));
    }
  }
  DeviceInfo device;
  Plan plan;
  Status status = query_device(0, &device);
  if (status) status = plan_prefill(spec.problem, device, options, &plan);
  if (!status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  testing::PrefillCase c = testing::make_prefill_case(spec);
  testing::DevicePrefillCase dev(c);
  DeviceBuffer workspace(plan.workspace_bytes);
  status = run_prefill(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr);
  if (!status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  dev.download_outputs(c);
  const testing::Comparison cmp = testing::check_prefill(c);
  std::printf("%s", describe(plan).c_str());
  std::printf("gpu prefill vs fp64 reference: %s\n", cmp.summary().c_str());
  return cmp.passed ? 0 : 1;
}

}  // namespace splitkv::cli
