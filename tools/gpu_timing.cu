#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpu_timing.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {
namespace {

using testing::check_cuda;

__global__ void fill_random_kernel(uint16_t* dst, size_t n, uint64_t seed, bool bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;  // splitmix64
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const float value = float(uint32_t(x >> 40)) * (2.f / 16777216.f) - 1.f;
    dst[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(value)) : __half_as_ushort(__float2half(value));
  }
}

__global__ void read_kernel(const int4* __restrict__ src, size_t n, int4* sink) {
  int4 acc = make_int4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int4 v = __ldcs(src + i);
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  if ((acc.x & acc.y & acc.z & acc.w) == -1) sink[threadIdx.x] = acc;  // keeps the loads alive
}

// A replay that has not finished after this many seconds is taken for a hang: the bench prints
// which wait it was and exits at once (status 3), since a hung context cannot run the next row
// either, so a device call loses seconds rather than its whole time limit. SPLITKV_BENCH_HANG_S
// overrides it (0: wait forever).
double hang_seconds() {
  static const double seconds = [] {
    const char* v = std::getenv("SPLITKV_BENCH_HANG_S");
    return v != nullptr ? std::atof(v) : 120.0;
  }();
  return seconds;
}

// cudaEventSynchronize with the hang limit above (spins on the event as the default schedule does,
// so the next replay is launched as soon as this one ends).
void wait_or_exit(cudaEvent_t event, const char* what) {
  const double limit = hang_seconds();
  if (limit <= 0) {
    check_cuda(cudaEventSynchronize(event), what);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check_cuda(e, what);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit) {
      std::fprintf(stderr, "splitkv bench: %s did not finish in %.0f s (a hang?); exiting\n", what, limit);
      std::fflush(stdout);
      std::_Exit(3);
    }
    std::this_thread::yield();
  }
}

// |last but one - last| / last of two or more round times.
double relative_spread(const std::vector<double>& rounds) {
  return std::abs(rounds[rounds.size() - 2] - rounds.back()) / rounds.back();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void fill_random_device(void* dst, size_t n, DType dtype, uint64_t seed) {
  fill_random_kernel<<<1024, 256>>>(static_cast<uint16_t*>(dst), n, seed, dtype == DType::kBF16);
  check_cuda(cudaGetLastError(), "fill_random_kernel");
}

double measure_read_ceiling_gbps() {
  const size_t bytes = size_t(4) << 30;
  testing::DeviceBuffer buffer(bytes), sink(512 * sizeof(int4));
  fill_random_device(buffer.get(), bytes / 2, DType::kBF16, 7);
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  std::vector<double> ms;
  for (int run = 0; run < 12; ++run) {
    check_cuda(cudaEventRecord(start), "record");
    read_kernel<<<sms * 4, 512>>>(static_cast<const int4*>(buffer.get()), bytes / sizeof(int4),
                                  static_cast<int4*>(sink.get()));
    check_cuda(cudaEventRecord(stop), "record");
    check_cuda(cudaEventSynchronize(stop), "read kernel");
    float t = 0;
    check_cuda(cudaEventElapsedTime(&t, start, stop), "elapsed");
    if (run >= 2) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return double(bytes) / (median(ms) * 1e-3) / 1e9;
}

GraphTiming time_graph(const std::function<bool(int, void*)>& enqueue, int calls, int replays) {
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaGraph_t graph;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  bool ok = true;
  for (int c = 0; c < calls && ok; ++c) ok = enqueue(c, stream);
  check_cuda(cudaStreamEndCapture(stream, &graph), "end capture");
  if (!ok) {
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    throw std::runtime_error("enqueue failed during capture");
  }
  cudaGraphExec_t exec;
  // Node priorities kept, as PyTorch's graphs keep them (the mixed route's prefill part runs on a
  // high-priority stream).
  check_cuda(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagUseNodePriority),
             "graph instantiate");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  // Warm-up: at least kWarmupSeconds of replays, so every row is timed at the clocks the card
  // holds under sustained load. The H200 of our runs leaves its boost clock for the software power
  // cap 0.1-0.3 s into a dense prefill (1980 -> 1845 MHz and lower), so a row
  // timed from a cold start read 231 or 260 µs depending on where the cap fell in its two rounds.
  const auto warmup_start = std::chrono::steady_clock::now();
  for (int w = 0; w < 3 || std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_start).count() <
                                   kWarmupSeconds;
       ++w) {
    check_cuda(cudaGraphLaunch(exec, stream), "warm-up replay");
    check_cuda(cudaEventRecord(stop, stream), "record");
    wait_or_exit(stop, "a warm-up replay");
  }
  // Rounds until the last two agree within kSteadySpread (at most kMaxRounds): a card still
  // leaving its boost clock when the warm-up ends shows it as a second round slower than the first.
  std::vector<double> round_us;
  while (round_us.size() < 2 ||
         (round_us.size() < size_t(kMaxRounds) && relative_spread(round_us) > kSteadySpread)) {
    std::vector<double> us;
    for (int r = 0; r < replays; ++r) {
      check_cuda(cudaEventRecord(start, stream), "record");
      check_cuda(cudaGraphLaunch(exec, stream), "replay");
      check_cuda(cudaEventRecord(stop, stream), "record");
      wait_or_exit(stop, "a timed replay");
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
      us.push_back(ms * 1e3 / calls);
    }
    round_us.push_back(median(us));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  GraphTiming t;
  t.us_per_call = round_us.back();
  t.spread = relative_spread(round_us);
  return t;
}

std::string gpu_name() {
  cudaDeviceProp prop;
  check_cuda(cudaGetDeviceProperties(&prop, 0), "device properties");
  return prop.name;
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

}  // namespace splitkv::cli
