// Command-line options -> API structs.
#pragma once

#include "cli_args.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv::cli {

Status to_dtype(const std::string& name, DType* dtype);
Status to_plan_options(const CliOptions& o, PlanOptions* options);
// Both of the above; on failure prints the message to stderr.
bool parse_dtype_and_options(const CliOptions& o, DType* dtype, PlanOptions* options);
DecodeProblem to_decode_problem(const CliOptions& o, DType dtype);
PrefillProblem to_prefill_problem(const CliOptions& o, DType dtype);

}  // namespace splitkv::cli
