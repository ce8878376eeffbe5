// Command-line options -> API structs.
#pragma once

#include "cli_args.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv::cli {

Status to_dtype(const std::string& name, DType* dtype);
Status to_kv_format(const std::string& name, KvFormat* format);
Status to_plan_options(const CliOptions& o, PlanOptions* options);
// The element types of a problem: Q/O dtype and KV cache format.
struct Formats {
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kNative;
};
// Formats and plan options; on failure prints the message to stderr.
bool parse_formats_and_options(const CliOptions& o, Formats* formats, PlanOptions* options);
DecodeProblem to_decode_problem(const CliOptions& o, const Formats& formats);
// With --kv-cache or --page-size: chunked prefill over a KV cache (PrefillProblem::kv_cache).
PrefillProblem to_prefill_problem(const CliOptions& o, const Formats& formats);

}  // namespace splitkv::cli
