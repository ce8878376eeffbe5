// The CPU backend: the split-KV algorithm (per-split partials, then the ordered log-sum-exp
// combine) in fp32 on host threads. It lets `splitkv bench`/`verify` run without a GPU and shows
// the algorithm the kernels implement in plain code.
#pragma once

#include "splitkv/plan.hpp"
#include "splitkv/problem.hpp"
#include "splitkv/status.hpp"

namespace splitkv::cpu {

// Runs a decode plan; every pointer in `tensors` (seq_lens and block_table included) is host memory.
Status run_decode(const Plan& plan, const DecodeTensors& tensors);

}  // namespace splitkv::cpu
