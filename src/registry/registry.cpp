#include "registry/registry.hpp"

#include <algorithm>
#include <vector>

#include "splitkv/splitkv.hpp"

namespace splitkv::registry {

bool Family::reads_kv_cache(bool paged) const {
  return (kv_caches & kv_cache_bit(paged ? "paged" : "contiguous")) != 0;
}

bool Family::has_head_dim(int head_dim) const {
  return std::find(head_dims.begin(), head_dims.begin() + num_head_dims, head_dim) != head_dims.begin() + num_head_dims;
}

bool Family::runs_on(int cc_major, int cc_minor) const {
  switch (arch) {
    case Arch::kSm80: return cc_major >= 8;
    case Arch::kSm90a: return cc_major == 9 && cc_minor == 0;  // arch-specific code: sm_90 only
  }
  return false;
}

int find_family(std::string_view name) {
  const Table<Family> all = families();
  for (int i = 0; i < all.size; ++i) {
    if (name == all[i].name) return i;
  }
  return -1;
}

int find_instance(int family, DType dtype, int head_dim, KvFormat kv_format) {
  const Table<Instance> all = compiled_instances();
  for (int i = 0; i < all.size; ++i) {
    const Instance& in = all[i];
    if (in.family == family && in.dtype == dtype && in.head_dim == head_dim && in.kv_format == kv_format) return i;
  }
  return -1;
}

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::kDecode: return "decode";
    case Kind::kPrefill: return "prefill";
    case Kind::kCombine: return "combine";
    case Kind::kAppend: return "append";
    case Kind::kDequant: return "dequant";
    case Kind::kNormalize: return "normalize";
    case Kind::kMixed: return "mixed";
  }
  return "unknown";
}

const char* to_string(Arch arch) {
  switch (arch) {
    case Arch::kSm80: return "sm80";
    case Arch::kSm90a: return "sm90a";
  }
  return "unknown";
}

}  // namespace splitkv::registry

// ---- the public view of the registry (splitkv.hpp) --------------------------------------------
namespace splitkv {

std::vector<KernelFamilyInfo> kernel_families() {
  std::vector<KernelFamilyInfo> out;
  const registry::Table<registry::Family> all = registry::families();
  for (int index = 0; index < all.size; ++index) {
    const registry::Family& f = all[index];
    KernelFamilyInfo info;
    info.name = f.name;
    info.kind = registry::to_string(f.kind);
    info.arch = registry::to_string(f.arch);
    for (Strategy s : {Strategy::kSplitQ, Strategy::kSplitKV, Strategy::kSplitV, Strategy::kTwoPass}) {
      if (f.serves(s)) info.strategies.push_back(s);
    }
    info.head_dims.assign(f.head_dims.begin(), f.head_dims.begin() + f.num_head_dims);
    for (DType d : {DType::kF16, DType::kBF16}) {
      if (f.has_dtype(d)) info.dtypes.push_back(d);
    }
    info.priority = f.priority;
    for (const registry::Instance& in : registry::compiled_instances()) {
      if (in.family == index) info.compiled.push_back({in.dtype, in.head_dim, in.kv_format});
    }
    out.push_back(std::move(info));
  }
  return out;
}

namespace {
bool attention_instance(const registry::Instance& in) {
  const registry::Kind kind = registry::families()[in.family].kind;
  return kind == registry::Kind::kDecode || kind == registry::Kind::kPrefill;
}
}  // namespace

std::vector<int> compiled_head_dims() {
  std::vector<int> dims;
  for (const registry::Instance& in : registry::compiled_instances()) {
    if (attention_instance(in) && std::find(dims.begin(), dims.end(), in.head_dim) == dims.end()) {
      dims.push_back(in.head_dim);
    }
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

bool dtype_compiled(DType dtype) {
  for (const registry::Instance& in : registry::compiled_instances()) {
    if (attention_instance(in) && in.dtype == dtype) return true;
  }
  return false;
}

}  // namespace splitkv
