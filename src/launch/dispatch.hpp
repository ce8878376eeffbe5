// Dispatch: from a registered family and (dtype, head dim, KV format) to the launcher compiled
// for it. The launcher table is generated beside the registry's instance table, index for index
// (cmake/KernelRegistry.cmake), so an instance this build lacks is reported, never launched.
#pragma once

#include <string>

#include "kernels/launch/launch_config.hpp"
#include "registry/registry.hpp"
#include "splitkv/status.hpp"

namespace splitkv::detail {

// A type-erased launcher: params points to the parameter struct of the family's kind
// (DecodeParams, PrefillParams or CombineParams).
using Launcher = cudaError_t (*)(const void* params, const LaunchConfig& config);

// Generated: kInstanceLaunchers[i] launches registry::compiled_instances()[i].
extern const Launcher kInstanceLaunchers[];

// The launcher of family `family` for (dtype, head_dim, kv_format), or an kUnsupported status
// saying the build lacks it.
Status find_launcher(int family, DType dtype, int head_dim, KvFormat kv_format, Launcher* launcher);
// The same for the family registered as `family_name` whose instances are keyed by the Q/O dtype
// alone (KvFormat::kNative): the combine and the cache kernels, which host code runs by name.
Status find_launcher(const char* family_name, DType dtype, int head_dim, Launcher* launcher);

// Launches and turns a CUDA error into a status naming `what`.
Status launch(Launcher launcher, const void* params, const LaunchConfig& config, const char* what);

}  // namespace splitkv::detail
