// Facts about the current CUDA device that launches depend on (host only).
#pragma once

namespace splitkv::detail {

// True when the current device runs programmatic dependent launch (compute capability >= 9.0).
// Cached per device; an attribute query, not a stream operation, so capture-safe.
bool current_device_supports_pdl();

}  // namespace splitkv::detail
