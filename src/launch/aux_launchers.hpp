// The launchers of the kernels outside the family registry: the KV-cache append, the dequantization
// that stages a quantized cache for chunked prefill, and the atomic combine's normalization. Host
// code calls them; their parameter structs live with their kernels (plain structs, no CUDA types).
#pragma once

#include "kernels/combine/atomic_normalize_params.hpp"
#include "kernels/quant/append_kv_params.hpp"
#include "kernels/quant/dequant_kv_params.hpp"
#include "launch/launch_config.hpp"
#include "splitkv/types.hpp"

namespace splitkv::detail {

// The row kernel, one instance per (new-row dtype, head dim); for *_kc caches the group kernel
// before it (launch/append_kv.cu).
cudaError_t launch_append_kv(const AppendKvParams& params, const LaunchConfig& config);

// One instance per staging dtype (launch/dequant_kv.cu).
cudaError_t launch_dequantize_kv(const DequantKvParams& params, const LaunchConfig& config);

// One instance per (dtype, head dim) (launch/atomic_normalize.cu).
cudaError_t launch_atomic_normalize(const AtomicNormalizeParams& params, DType dtype, int head_dim,
                                    const LaunchConfig& config);

}  // namespace splitkv::detail
