// Which kernel a plan runs (internal: the public Plan speaks of strategies and tile shapes).
#pragma once

#include "kernels/tile_table.hpp"
#include "splitkv/plan.hpp"

namespace splitkv::plan {

tiles::PrefillKernel prefill_kernel_of(const Plan& plan);

}  // namespace splitkv::plan
