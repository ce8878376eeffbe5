// Which registered kernel family serves a plan: the caller's choice (PlanOptions::family),
// checked, or the planner's.
#pragma once

#include <string>

#include "registry/registry.hpp"
#include "splitkv/plan.hpp"

namespace splitkv::plan {

struct FamilyRequest {
  registry::Kind kind;
  Strategy strategy;  // the strategy the family must serve
  int head_dim;
  DType dtype;
  KvFormat kv_format;  // resolved (never kNative)
  DeviceInfo device;
  std::string name;   // PlanOptions::family: empty for the planner's choice
  bool kv_cache = false;     // prefill over a decode cache: only families that read its layout
  bool paged_cache = false;  // kv_cache: paged (page_size > 0), else contiguous
  int rows_per_kv = 1;       // decode: packed query rows per KV head (q_len x Hq/Hkv)
};

// Sets *family to an index into registry::families(). Without a name: among the families of the
// request's kind with priority >= 0 that serve it, the ones this build compiled come first, then
// the higher priority. Errors name the argument that rules families out.
Status choose_family(const FamilyRequest& request, int* family);

}  // namespace splitkv::plan
