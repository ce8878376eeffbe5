#include "launch/dispatch.hpp"

#include <string>

#include "common/formats.hpp"

namespace splitkv::detail {

Status find_launcher(int family, DType dtype, int head_dim, KvFormat kv_format, Launcher* launcher) {
  const int index = registry::find_instance(family, dtype, head_dim, registry_kv_format(kv_format, dtype));
  if (index < 0) {
    if (registry::families()[family].study) {
      return Status::unsupported("plan.family", std::string("kernel family ") + registry::families()[family].name +
                                                    " is a study family, compiled only with "
                                                    "-DSPLITKV_STUDY_FAMILIES=ON");
    }
    return Status::unsupported(
        "plan.family", std::string("kernel family ") + registry::families()[family].name + " for " + to_string(dtype) +
                           ", head_dim " + std::to_string(head_dim) + ", " + to_string(kv_format) +
                           " KV is not compiled into this build (see SPLITKV_HEAD_DIMS, SPLITKV_DTYPES and "
                           "CMAKE_CUDA_ARCHITECTURES)");
  }
  *launcher = kInstanceLaunchers[index];
  return Status::success();
}

Status find_launcher(const char* family_name, DType dtype, int head_dim, Launcher* launcher) {
  const int family = registry::find_family(family_name);
  if (family < 0) {  // a row missing from kernel_families.cmake: a build defect, reported, not indexed
    return Status::unsupported("family", std::string("no kernel family named ") + family_name + " is registered");
  }
  return find_launcher(family, dtype, head_dim, KvFormat::kNative, launcher);
}

Status launch(Launcher launcher, const void* params, const LaunchConfig& config, const char* what) {
  const cudaError_t error = launcher(params, config);
  if (error == cudaSuccess) return Status::success();
  return Status(StatusCode::kCudaError, "", std::string(what) + ": " + cudaGetErrorString(error));
}

}  // namespace splitkv::detail
