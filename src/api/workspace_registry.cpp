#include "api/workspace_registry.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace splitkv::detail {
namespace {

// False until the first prepare_workspace: the default merges never prepare one, so their calls
// find the table empty without taking the lock.
std::atomic<bool> any_prepared{false};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

// Workspace address -> the seal of the plan it is prepared for (0: none, or another plan used it
// since). Entries are never removed: a freed and reused address is a workspace like any other.
std::unordered_map<const void*, uint64_t>& prepared_for() {
  static std::unordered_map<const void*, uint64_t> table;
  return table;
}

}  // namespace

void note_workspace_prepared(const void* workspace, uint64_t seal) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  prepared_for()[workspace] = seal;
  any_prepared.store(true, std::memory_order_release);
}

bool note_workspace_use(const void* workspace, uint64_t seal) {
  if (!any_prepared.load(std::memory_order_acquire)) return false;  // nothing prepared, nothing to forget
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = prepared_for().find(workspace);
  if (it == prepared_for().end()) return false;
  if (it->second != seal) {
    it->second = 0;  // another plan's call: whatever was prepared is gone
    return false;
  }
  return true;
}

}  // namespace splitkv::detail
