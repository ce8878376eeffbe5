// GPU timing helpers for `splitkv bench`: device-side random fill, the read-bandwidth ceiling and
// CUDA-graph replay timing (docs/BENCHMARKING.md: graphs of back-to-back calls, median of >= 20 replays).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "splitkv/types.hpp"

namespace splitkv::cli {

// Fills n 16-bit float elements (fp16 or bf16) with deterministic pseudo-random values in [-1, 1).
void fill_random_device(void* dst, size_t n, DType dtype, uint64_t seed);

// Bytes/second of a plain vectorized read kernel over a 4 GiB buffer (16-byte streaming loads,
// grid-stride, 4 blocks of 512 threads per SM); median of 10 runs.
double measure_read_ceiling_gbps();

struct GraphTiming {
  double us_per_call = 0;  // the last round's median replay time / calls per replay
  double spread = 0;       // |last but one - last| / last: the noise floor of this measurement
};

// Timed rounds: at least 2, more (up to kMaxRounds) while the last two differ by more than
// kSteadySpread of the last.
constexpr int kMaxRounds = 6;
constexpr double kSteadySpread = 0.02;

// Seconds of warm-up replays before a row is timed (bench/peers.py uses the same).
constexpr double kWarmupSeconds = 0.5;

// Captures `calls` invocations of enqueue(call_index, stream) in one CUDA graph and times its
// replays: rounds of `replays` (two, or more until steady) after at least kWarmupSeconds of
// warm-up replays. enqueue returns false on error.
GraphTiming time_graph(const std::function<bool(int, void*)>& enqueue, int calls, int replays = 25);

std::string gpu_name();
std::string today();

}  // namespace splitkv::cli
