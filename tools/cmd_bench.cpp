#include <cstdio>

#include "commands.hpp"
#include "cpu_runner.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {

int cmd_bench(const CliOptions& o) {
  const bool gpu = testing::gpu_available();
  if (o.backend == "gpu" && !gpu) {
    std::fprintf(stderr, "splitkv: --backend gpu, but no CUDA device is available\n");
    return 1;
  }
  if (gpu && o.backend != "cpu") return gpu_bench(o);
  CliOptions cpu = o;
  if (!gpu) std::printf("no CUDA device found: running the CPU backend (split-KV partials + combine) instead\n");
  if (!o.shape_given) {
    // A small default problem: one GQA decode step over a 2k-token cache.
    cpu.batch = 2;
    cpu.num_q_heads = 8;
    cpu.num_kv_heads = 2;
    cpu.head_dim = 64;
    cpu.q_len = 1;
    cpu.kv_len = 2048;
  }
  return run_cpu_decode(cpu, o.iters);
}

}  // namespace splitkv::cli
