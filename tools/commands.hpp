// The `splitkv` subcommands. Each returns the process exit code.
#pragma once

#include "cli_args.hpp"

namespace splitkv::cli {

int cmd_plan(const CliOptions& o);
int cmd_verify(const CliOptions& o);
int cmd_bench(const CliOptions& o);
int cmd_families(const CliOptions& o);

// GPU side: tools/gpu_decode.cpp, tools/gpu_prefill.cpp and tools/gpu_mixed.cpp (suite mixed).
int gpu_decode_bench(const CliOptions& o);
int gpu_decode_verify(const CliOptions& o);
int gpu_prefill_bench(const CliOptions& o);
int gpu_prefill_verify(const CliOptions& o);
int gpu_mixed_bench(const CliOptions& o);

inline bool is_prefill(const CliOptions& o) {
  return o.mode == "prefill" || o.suite == "prefill" || o.suite == "strategies" || o.suite == "variants-prefill";
}
inline int gpu_bench(const CliOptions& o) {
  if (o.suite == "mixed") return gpu_mixed_bench(o);
  return is_prefill(o) ? gpu_prefill_bench(o) : gpu_decode_bench(o);
}
inline int gpu_verify(const CliOptions& o) { return is_prefill(o) ? gpu_prefill_verify(o) : gpu_decode_verify(o); }

}  // namespace splitkv::cli
