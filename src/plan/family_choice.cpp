#include "plan/family_choice.hpp"

#include <string>

#include "common/formats.hpp"

namespace splitkv::plan {
namespace {

std::string head_dims_of(const registry::Family& f) {
  std::string s;
  for (int i = 0; i < f.num_head_dims; ++i) s += (i ? ", " : "") + std::to_string(f.head_dims[i]);
  return "{" + s + "}";
}

// Why family f cannot serve the request, naming the argument that rules it out.
Status can_serve(const registry::Family& f, const FamilyRequest& r) {
  const std::string who = std::string("kernel family ") + f.name;
  if (!f.serves(r.strategy)) {
    return Status::unsupported("options.strategy", who + " does not serve strategy " + to_string(r.strategy));
  }
  if (!f.has_head_dim(r.head_dim)) {
    return Status::unsupported("head_dim", who + " supports head dims " + head_dims_of(f) + ", got " +
                                               std::to_string(r.head_dim));
  }
  if (!f.has_dtype(r.dtype)) {
    return Status::unsupported("dtype", who + " does not support " + to_string(r.dtype));
  }
  if (!f.has_kv_format(detail::registry_kv_format(r.kv_format, r.dtype))) {
    return Status::unsupported("kv_format", who + " does not read " + to_string(r.kv_format) + " caches");
  }
  if (r.kv_cache && !f.reads_kv_cache(r.paged_cache)) {
    return Status::unsupported(r.paged_cache ? "page_size" : "kv_cache",
                               who + " does not read K/V from a " + (r.paged_cache ? "paged" : "contiguous") +
                                   " KV cache (chunked prefill)");
  }
  if (!f.runs_on(r.device.cc_major, r.device.cc_minor)) {
    return Status::unsupported("device", who + " (" + registry::to_string(f.arch) + ") does not run on sm_" +
                                             std::to_string(r.device.cc_major) + std::to_string(r.device.cc_minor));
  }
  // Last: a tile size is a preference, so a family ruled out for more than that reports the other reason.
  if (r.rows_per_kv < f.min_rows) {
    return Status::unsupported("q_len", who + " serves KV heads with at least " + std::to_string(f.min_rows) +
                                            " packed query rows (q_len x Hq/Hkv), got " + std::to_string(r.rows_per_kv));
  }
  if (f.max_rows > 0 && r.rows_per_kv > f.max_rows) {
    return Status::unsupported("q_len", who + " serves KV heads with at most " + std::to_string(f.max_rows) +
                                            " packed query rows (q_len x Hq/Hkv), got " + std::to_string(r.rows_per_kv));
  }
  return Status::success();
}

bool compiled(int family, const FamilyRequest& r) {
  return registry::find_instance(family, r.dtype, r.head_dim, detail::registry_kv_format(r.kv_format, r.dtype)) >= 0;
}

std::string names_of_kind(registry::Kind kind) {
  std::string s;
  for (const registry::Family& f : registry::families()) {
    if (f.kind == kind) s += (s.empty() ? "" : ", ") + std::string(f.name);
  }
  return s;
}

}  // namespace

Status choose_family(const FamilyRequest& r, int* family) {
  const registry::Table<registry::Family> all = registry::families();
  if (!r.name.empty()) {
    const int index = registry::find_family(r.name);
    if (index < 0 || all[index].kind != r.kind) {
      return Status::invalid("options.family", std::string("a ") + registry::to_string(r.kind) + " family (" +
                                                   names_of_kind(r.kind) + ")",
                             r.name);
    }
    if (Status s = can_serve(all[index], r); !s) return s;
    *family = index;
    return Status::success();
  }
  // A device no family of this kind runs on is the reason, whatever else the problem asks for.
  bool any_runs = false;
  for (int i = 0; i < all.size; ++i) {
    any_runs |= all[i].kind == r.kind && all[i].priority >= 0 && all[i].runs_on(r.device.cc_major, r.device.cc_minor);
  }
  if (!any_runs) {
    return Status::unsupported("device", std::string("no ") + registry::to_string(r.kind) +
                                             " kernel family runs on sm_" + std::to_string(r.device.cc_major) +
                                             std::to_string(r.device.cc_minor) + " (sm_80 or later needed)");
  }
  int best = -1;
  Status first_failure = Status::unsupported("options.strategy", std::string("no ") + registry::to_string(r.kind) +
                                                                     " kernel family serves strategy " +
                                                                     to_string(r.strategy));
  int failure_priority = -1;
  for (int i = 0; i < all.size; ++i) {
    const registry::Family& f = all[i];
    if (f.kind != r.kind || f.priority < 0) continue;
    if (Status s = can_serve(f, r); !s) {
      // Report the most relevant reason: that of the highest-priority family serving the strategy.
      if (f.serves(r.strategy) && f.priority > failure_priority) {
        first_failure = s;
        failure_priority = f.priority;
      }
      continue;
    }
    if (best < 0) {
      best = i;
      continue;
    }
    const bool c_new = compiled(i, r), c_best = compiled(best, r);
    if (c_new != c_best ? c_new : f.priority > all[best].priority) best = i;
  }
  if (best < 0) return first_failure;
  *family = best;
  return Status::success();
}

}  // namespace splitkv::plan
