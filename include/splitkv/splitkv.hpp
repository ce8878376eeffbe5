// splitkv public API: split-KV attention for decode and prefill.
//
//   splitkv::DeviceInfo dev;          splitkv::query_device(0, &dev);
//   splitkv::Plan plan;               splitkv::plan_decode(problem, dev, {}, &plan);
//   void* ws = ...plan.workspace_bytes of device memory...
//   splitkv::run_decode(plan, tensors, ws, plan.workspace_bytes, stream);   // graph-capturable
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "splitkv/append_kv.hpp"
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

// Makes a new workspace ready for the plan: zeroes the counters of a decode plan whose splits
// merge by Merge::kFused or kAtomic, asynchronously on `stream`; does nothing for other plans.
// Call it once per workspace (not per call); it may be captured in a graph like the runs.
Status prepare_workspace(const Plan& plan, void* workspace, size_t workspace_bytes, Stream stream);

// Runs the planned prefill, same contract as run_decode.
Status run_prefill(const Plan& plan, const PrefillTensors& tensors, void* workspace,
                   size_t workspace_bytes, Stream stream);

// Merges split partials given by the caller (see CombineProblem). Same contract as run_decode;
// needs no plan and no workspace.
Status run_combine(const CombineProblem& problem, const CombineTensors& tensors, Stream stream);

// The kernel-family registry: every registered family and what this build compiled of it.
struct KernelFamilyInfo {
  std::string name;
  std::string kind;                     // decode | prefill | combine | append | dequant | normalize
  std::string arch;                     // sm80 (sm_80 and later) | sm90a (sm_90 only)
  std::vector<Strategy> strategies;     // served
  std::vector<int> head_dims;           // supported
  std::vector<DType> dtypes;            // supported Q/O types
  int priority = 0;                     // < 0: chosen only by name (PlanOptions::family)
  struct Compiled {
    DType dtype;
    int head_dim;
    KvFormat kv_format;
  };
  std::vector<Compiled> compiled;       // instances in this build
};
std::vector<KernelFamilyInfo> kernel_families();

// Head dims and Q/O element types this build compiled attention kernels for (a decode or prefill
// family; the cache kernels, append_kv, dequant_kv and the atomic normalize, are compiled for every
// head dim and type, whatever SPLITKV_HEAD_DIMS and SPLITKV_DTYPES say).
std::vector<int> compiled_head_dims();
bool dtype_compiled(DType dtype);

}  // namespace splitkv
