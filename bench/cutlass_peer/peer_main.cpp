// splitkv_cutlass_peer: times the CUTLASS Hopper FMHA example's forward kernels on the prefill
// suite's dense rows (Lq == Lk, one KV head per query head) the way `splitkv bench` times ours:
// CUDA-graph replays of back-to-back calls rotating over input sets of >= 1 GiB (cold L2), after
// the same warm-up and rounds (median of the last). Every kernel the example has for the row's head
// dim is timed; the row reports the fastest. Output: a peers JSON (`"cutlass": {"us", ...}` per
// row) that bench/merge_results.py joins into the prefill table (--cutlass).
//
//   splitkv_cutlass_peer --json out.json [--row B,H,L,D,causal ...]   (default: the suite's rows)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "cli_args.hpp"
#include "gpu_timing.hpp"
#include "peer_kernel.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cutlass_peer {
namespace {

struct Row {
  int batch, heads, len, head_dim;
  bool causal;
};

// The prefill suite's rows this peer can run (bench/peers.py PREFILL: Lq == Lk, Hq == Hkv).
const std::vector<Row> kSuiteRows = {
    {4, 12, 1024, 64, false},  {4, 12, 4096, 64, false},  {4, 12, 8192, 64, false},  {2, 12, 16384, 64, false},
    {16, 16, 1024, 128, false}, {4, 16, 4096, 128, false}, {1, 16, 16384, 128, false},
    {16, 16, 1024, 128, true},  {4, 16, 4096, 128, true},  {1, 16, 16384, 128, true},
    {4, 16, 4096, 256, false},  {4, 16, 4096, 256, true},
};

const char* dtype_of(int head_dim) { return head_dim == 64 ? "fp16" : "bf16"; }

PeerKernels kernels_for(const Row& r) {
  switch (r.head_dim) {
    case 64: return kernels_d64_fp16(r.causal);
    case 128: return kernels_d128_bf16(r.causal);
    case 256: return kernels_d256_bf16(r.causal);
    default: return {};
  }
}

// One input set's buffers; Q/K/V random in [-1, 1) as the suite fills ours.
struct Set {
  testing::DeviceBuffer q, k, v, o, lse;
  PeerBuffers view() const {
    return {q.get(), k.get(), v.get(), o.get(), static_cast<float*>(lse.get())};
  }
};

// The first output elements after one launch over a NaN-poisoned O: a kernel that did not run or
// wrote garbage is not timed.
bool output_is_finite(const Set& s, size_t elems, DType dtype) {
  std::vector<uint16_t> host(std::min<size_t>(elems, 4096));
  s.o.download(host.data(), host.size() * 2);
  const uint16_t exponent = dtype == DType::kBF16 ? 0x7f80 : 0x7c00;  // all ones: Inf or NaN
  for (uint16_t bits : host) {
    if ((bits & exponent) == exponent) return false;
  }
  return true;
}

std::string row_json(const Row& r, const std::string& best, double best_us, double spread,
                     const std::map<std::string, std::string>& variants) {
  std::ostringstream o;
  o << "{\"case\": {\"B\": " << r.batch << ", \"Hq\": " << r.heads << ", \"Hkv\": " << r.heads << ", \"Lq\": " << r.len
    << ", \"Lk\": " << r.len << ", \"D\": " << r.head_dim << ", \"dtype\": \"" << dtype_of(r.head_dim)
    << "\", \"causal\": " << (r.causal ? "true" : "false") << ", \"page_size\": 0}, \"cutlass\": {";
  if (best_us > 0) {
    o << "\"us\": " << best_us << ", \"variant\": \"" << best << "\", \"spread\": " << spread;
  } else {
    o << "\"us\": null, \"error\": \"no example kernel ran this row\"";
  }
  o << ", \"variants\": {";
  bool first = true;
  for (const auto& [name, value] : variants) {
    o << (first ? "" : ", ") << "\"" << name << "\": " << value;
    first = false;
  }
  o << "}}}";
  return o.str();
}

std::string measure_row(const Row& r) {
  const size_t qkv_elems = size_t(r.batch) * r.heads * r.len * r.head_dim;
  const int sets = cli::sets_for_cold_l2(2.0 * 4 * qkv_elems, 16);  // Q, K, V, O at 2 bytes, as ours
  std::vector<Set> data(sets);
  std::vector<PeerBuffers> views;
  const DType dtype = r.head_dim == 64 ? DType::kF16 : DType::kBF16;
  for (int i = 0; i < sets; ++i) {
    Set& s = data[i];
    s.q = testing::DeviceBuffer(qkv_elems * 2);
    s.k = testing::DeviceBuffer(qkv_elems * 2);
    s.v = testing::DeviceBuffer(qkv_elems * 2);
    s.o = testing::DeviceBuffer(qkv_elems * 2);
    s.lse = testing::DeviceBuffer(size_t(r.batch) * r.heads * r.len * sizeof(float));
    cli::fill_random_device(s.q.get(), qkv_elems, dtype, 500 + 3 * i);
    cli::fill_random_device(s.k.get(), qkv_elems, dtype, 501 + 3 * i);
    cli::fill_random_device(s.v.get(), qkv_elems, dtype, 502 + 3 * i);
    views.push_back(s.view());
  }
  const PeerProblem problem{r.batch, r.heads, r.len, r.len, r.head_dim, r.causal};
  std::string best;
  double best_us = 0, best_spread = 0;
  std::map<std::string, std::string> variants;
  for (auto& kernel : kernels_for(r)) {
    std::string value = "null";
    try {
      if (kernel->initialize(problem, views)) {
        data[0].o.fill_bytes(0xff);
        const bool launched = kernel->enqueue(0, nullptr) && cudaDeviceSynchronize() == cudaSuccess;
        if (launched && output_is_finite(data[0], qkv_elems, dtype)) {
          // The harness `splitkv bench` times prefill rows with: at least 8 calls per replay, its
          // default --iters replays per round, no workspace.
          cli::GraphTiming t;
          const Status timed = cli::time_rotating_calls(
              sets, 8, cli::CliOptions{}.iters,
              [&](int set, Stream stream) {
                return kernel->enqueue(set, cudaStream_t(stream)) ? Status::success()
                                                                 : Status(StatusCode::kCudaError, "", "launch failed");
              },
              &t);
          if (!timed) throw std::runtime_error(timed.message());
          value = std::to_string(t.us_per_call);
          if (best_us == 0 || t.us_per_call < best_us) {
            best = kernel->name(), best_us = t.us_per_call, best_spread = t.spread;
          }
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kernel->name().c_str(), e.what());
      cudaGetLastError();
    }
    variants[kernel->name()] = value;
    std::printf("cutlass B=%d H=%d L=%d D=%d %s %-24s %s us\n", r.batch, r.heads, r.len, r.head_dim,
                r.causal ? "causal" : "full  ", kernel->name().c_str(), value.c_str());
    std::fflush(stdout);
  }
  return row_json(r, best, best_us, best_spread, variants);
}

bool parse_row(const char* text, Row* r) {
  int causal = 0;
  if (std::sscanf(text, "%d,%d,%d,%d,%d", &r->batch, &r->heads, &r->len, &r->head_dim, &causal) != 5) return false;
  r->causal = causal != 0;
  return r->batch > 0 && r->heads > 0 && r->len > 0 && (r->head_dim == 64 || r->head_dim == 128 || r->head_dim == 256);
}

int run(int argc, char** argv) {
  std::string json_path;
  std::vector<Row> rows;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--row") && i + 1 < argc) {
      Row r;
      if (!parse_row(argv[++i], &r)) {
        std::fprintf(stderr, "--row: expected B,H,L,D,causal with D in {64, 128, 256}, got '%s'\n", argv[i]);
        return 2;
      }
      rows.push_back(r);
    } else {
      std::fprintf(stderr, "usage: splitkv_cutlass_peer --json OUT [--row B,H,L,D,causal ...]\n");
      return 2;
    }
  }
  if (json_path.empty()) {
    std::fprintf(stderr, "--json: the output file is required\n");
    return 2;
  }
  if (rows.empty()) rows = kSuiteRows;
  std::vector<std::string> out;
  for (const Row& r : rows) out.push_back(measure_row(r));
  std::ofstream f(json_path);
  f << "{\"suite\": \"prefill\", \"peer\": \"CUTLASS examples/88_hopper_fmha\", \"gpu\": \"" << cli::gpu_name()
    << "\", \"date\": \"" << cli::today() << "\", \"rows\": [\n";
  for (size_t i = 0; i < out.size(); ++i) f << out[i] << (i + 1 < out.size() ? ",\n" : "\n");
  f << "]}\n";
  return f.good() ? 0 : 1;
}

}  // namespace
}  // namespace splitkv::cutlass_peer

int main(int argc, char** argv) { return splitkv::cutlass_peer::run(argc, argv); }
