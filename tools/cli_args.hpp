// Command-line options of the `splitkv` tool.
#pragma once

#include <cstdint>
#include <string>

#include "splitkv/plan.hpp"

namespace splitkv::cli {

struct CliOptions {
  std::string command;  // plan | verify | bench | families | help
  std::string mode = "decode";  // decode | prefill
  int batch = 1;
  int num_q_heads = 32;
  int num_kv_heads = 8;
  int head_dim = 128;
  int q_len = 1;        // decode: queries per sequence; prefill: query length
  int kv_len = 4096;    // decode: max_kv_len; prefill: key length
  std::string dtype = "bf16";
  std::string kv_format = "native";  // native | fp16 | bf16 | fp8 | int8 | int4 | k8v4
  int page_size = 0;   // decode: paged KV; prefill: a paged KV cache (implies kv_cache)
  bool kv_head_major = false;  // decode: the cache stored [slabs, Hkv, tokens, D] (strides), not [slabs, tokens, Hkv, D]
  bool kv_cache = false;  // prefill: K/V read from a KV cache (chunked prefill), --mode prefill only
  bool causal = false;
  bool varlen = false;
  int num_splits = 0;   // 0: auto
  int max_splits = 0;
  int split_tokens = 0;
  Merge merge = Merge::kAuto;        // --merge auto|combine-kernel|cluster|fused|atomic
  float atomic_reference_lse = 0.f;  // --atomic-reference-lse X
  PlanTuning tuning;                 // --no-<switch> flags and --l2-prefetch-keys (src/plan/plan_options_table.hpp)
  // Attention variants (docs/VARIANTS.md): --window L[,R], --softcap X, --sinks, --tree (decode).
  int window_left = -1;
  int window_right = -1;
  float softcap = 0.f;
  bool sinks = false;
  bool tree_mask = false;
  std::string strategy = "auto";
  std::string family;    // empty: the planner's choice
  int iters = 20;
  std::string json_path;
  std::string suite;     // bench: decode | prefill | strategies | sweep | quant | variants | variants-prefill | mixed
  std::string backend = "auto";  // auto | gpu | cpu
  int sm_count = 0;      // plan: override the device's SM count
  uint64_t seed = 1;
  bool shape_given = false;  // any shape flag on the command line
};

// Parses argv; on error returns false and sets `error`.
bool parse_args(int argc, char** argv, CliOptions* options, std::string* error);
void print_usage();

}  // namespace splitkv::cli
