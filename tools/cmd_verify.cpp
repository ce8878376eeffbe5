#include <cstdio>

#include "commands.hpp"
#include "cpu_runner.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {

int cmd_verify(const CliOptions& o) {
  const bool gpu = testing::gpu_available();
  if (o.backend == "gpu" && !gpu) {
    std::fprintf(stderr, "splitkv: --backend gpu, but no CUDA device is available\n");
    return 1;
  }
  if (gpu && o.backend != "cpu") return gpu_verify(o);
  if (!gpu) std::printf("no CUDA device found: verifying the CPU backend\n");
  return run_cpu_decode(o, 1);
}

}  // namespace splitkv::cli
