// A plan's seal: a hash of every field the run reads, set by plan_decode / plan_prefill. run_*
// refuses a plan whose fields no longer hash to its seal (edited after planning, or never planned):
// the kernels size their grids, partials and workspace offsets from these fields, so an edited
// plan could divide by zero or write outside the workspace.
#pragma once

#include <cstdint>

#include "splitkv/plan.hpp"
#include "splitkv/status.hpp"

namespace splitkv::detail {

uint64_t plan_seal(const Plan& plan);

// Success when plan.seal matches its fields; otherwise an error naming `plan`.
Status check_plan_seal(const Plan& plan);

}  // namespace splitkv::detail
