// The CPU backend behind `splitkv bench` / `verify` on machines without a GPU.
#pragma once

#include "cli_args.hpp"

namespace splitkv::cli {

// Runs decode on the CPU backend `iterations` times, verifies the result against the fp64
// reference and prints (and optionally writes as JSON) the outcome. Returns the exit code.
int run_cpu_decode(const CliOptions& o, int iterations);

}  // namespace splitkv::cli
