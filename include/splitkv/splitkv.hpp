// splitkv public API: split-KV attention for decode and prefill.
//
//   splitkv::DeviceInfo dev;          splitkv::query_device(0, &dev);
//   splitkv::Plan plan;               splitkv::plan_decode(problem, dev, {}, &plan);
//   void* ws = ...plan.workspace_bytes of device memory...
//   splitkv::run_decode(plan, tensors, ws, plan.workspace_bytes, stream);   // graph-capturable
#pragma once

#include <cstddef>
#include <vector>

#include "splitkv/plan.hpp"
#include "splitkv/problem.hpp"
#include "splitkv/status.hpp"
#include "splitkv/types.hpp"

struct CUstream_st;

namespace splitkv {

using Stream = CUstream_st*;  // a cudaStream_t; nullptr is the legacy default stream

// Fills `info` from the CUDA runtime. kNoDevice when there is no usable GPU.
Status query_device(int device, DeviceInfo* info);

// Runs the planned decode. Never allocates, never synchronizes, never reads device memory on the
// host: safe to capture in a CUDA graph and replay with other lengths (<= plan's max_kv_len).
Status run_decode(const Plan& plan, const DecodeTensors& tensors, void* workspace,
                  size_t workspace_bytes, Stream stream);

// Runs the planned prefill, same contract as run_decode.
Status run_prefill(const Plan& plan, const PrefillTensors& tensors, void* workspace,
                   size_t workspace_bytes, Stream stream);

// Head dims and element types compiled into this build.
std::vector<int> compiled_head_dims();
bool dtype_compiled(DType dtype);

}  // namespace splitkv
