#include "cpu_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "problem_builder.hpp"
#include "testing/decode_check.hpp"

namespace splitkv::cli {

int run_cpu_decode(const CliOptions& o, int iterations) {
  if (o.mode != "decode") {
    std::fprintf(stderr, "splitkv: the CPU backend implements decode only; prefill needs a GPU\n");
    return 1;
  }
  Formats formats;
  PlanOptions options;
  if (!parse_formats_and_options(o, &formats, &options)) return 1;
  testing::DecodeCaseSpec spec;
  spec.problem = to_decode_problem(o, formats);
  spec.seed = o.seed;
  spec.head_major_kv = o.kv_head_major;
  Plan plan;
  Status status = plan_decode(spec.problem, DeviceInfo::h200(), options, &plan);
  if (!status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  testing::DecodeCase c = testing::make_decode_case(spec);
  const DecodeTensors tensors = c.host_tensors();
  std::vector<double> times_us;
  for (int it = 0; it < std::max(1, iterations); ++it) {
    testing::poison_outputs(c);
    const auto start = std::chrono::steady_clock::now();
    status = cpu::run_decode(plan, tensors);
    const auto stop = std::chrono::steady_clock::now();
    if (!status) {
      std::fprintf(stderr, "%s\n", status.message().c_str());
      return 1;
    }
    times_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::sort(times_us.begin(), times_us.end());
  const double median_us = times_us[times_us.size() / 2];
  const testing::Comparison cmp = testing::check_decode(c);
  const DecodeProblem& p = spec.problem;
  const char* layout = o.kv_head_major ? "head-major" : "token-major";
  std::printf("cpu backend decode: B=%d Hq=%d Hkv=%d D=%d q_len=%d Lk=%d %s page_size=%d kv_layout=%s splits=%d\n",
              p.batch, p.num_q_heads, p.num_kv_heads, p.head_dim, p.q_len, p.max_kv_len, o.dtype.c_str(), p.page_size,
              layout, plan.num_splits());
  std::printf("  median %.1f us over %zu runs; vs fp64 reference: %s\n", median_us, times_us.size(),
              cmp.summary().c_str());
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    json << "{\"suite\": \"cpu-decode\", \"backend\": \"cpu\", \"rows\": [{\"case\": {\"B\": " << p.batch
         << ", \"Hq\": " << p.num_q_heads << ", \"Hkv\": " << p.num_kv_heads << ", \"Lq\": " << p.q_len
         << ", \"Lk\": " << p.max_kv_len << ", \"D\": " << p.head_dim << ", \"dtype\": \"" << o.dtype
         << "\", \"page_size\": " << p.page_size << ", \"kv_layout\": \"" << layout << "\", \"splits\": " << plan.num_splits()
         << "}, \"us\": " << median_us
         << ", \"verified\": " << (cmp.passed ? "true" : "false") << "}]}\n";
  }
  return cmp.passed ? 0 : 1;
}

}  // namespace splitkv::cli
