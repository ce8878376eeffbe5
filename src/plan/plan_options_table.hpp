// One description of PlanOptions' merge names and PlanTuning's switches, read by the CLI (flags,
// usage), the Python bindings (keyword arguments, attributes) and `describe`: adding a switch is one
// row here.
#pragma once

#include <string>

#include "splitkv/plan.hpp"

namespace splitkv::plan {

struct MergeName {
  Merge merge;
  const char* name;  // CLI --merge NAME, Python merge="NAME"; to_string(merge)
};

inline constexpr MergeName kMergeNames[] = {
    {Merge::kAuto, "auto"},     {Merge::kCombineKernel, "combine-kernel"}, {Merge::kCluster, "cluster"},
    {Merge::kFused, "fused"},   {Merge::kAtomic, "atomic"},
};

// The merge names, comma-separated (for messages).
inline std::string merge_names() {
  std::string names;
  for (const MergeName& m : kMergeNames) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

// False (and *merge unchanged) when `name` is none of kMergeNames.
inline bool merge_of(const std::string& name, Merge* merge) {
  for (const MergeName& m : kMergeNames) {
    if (name == m.name) {
      *merge = m.merge;
      return true;
    }
  }
  return false;
}

// The on/off rules of PlanTuning (the measured ones on by default, the flag turning them off; the
// rest off, the flag turning them on).
struct TuningSwitch {
  const char* name;  // the field's name: Python keyword and attribute
  const char* flag;  // CLI flag that flips it from its default
  bool PlanTuning::*field;
  const char* help;  // what the flag does
  bool default_on = true;
};

inline constexpr TuningSwitch kTuningSwitches[] = {
    {"prefill_route", "--no-prefill-route", &PlanTuning::prefill_route,
     "speculative rows keep the decode kernels (no chunked-prefill route)"},
    {"persistent_prefill", "--no-persistent", &PlanTuning::persistent_prefill,
     "prefill_sm90 launches one block per tile (no persistent grid)"},
    {"stream_k_prefill", "--no-stream-k", &PlanTuning::stream_k_prefill,
     "no stream-K tail on a persistent prefill grid"},
    {"l2_prefetch", "--no-l2-prefetch", &PlanTuning::l2_prefetch,
     "decode blocks prefetch nothing into L2 before their PDL wait"},
    {"even_placement", "--no-even-placement", &PlanTuning::even_placement,
     "one-wave decode grids keep the kernel's own shared memory size"},
    {"mixed_route", "--no-mixed-route", &PlanTuning::mixed_route,
     "a paged cache's varlen prefill serves every sequence as prefill tiles (no mixed route)"},
    {"mixed_route_serial", "--mixed-serial", &PlanTuning::mixed_route_serial,
     "the mixed route runs its parts one after the other (prefill part first, whole grid)", false},
    {"decode_stream", "--no-decode-stream", &PlanTuning::decode_stream,
     "one-split short-window decode plans keep the two-warp twin's rounds of blocks (no stream kernel)"},
};

// The one integer switch: PlanTuning::l2_prefetch_keys (CLI --l2-prefetch-keys N, Python l2_prefetch_keys).
inline constexpr const char* kL2PrefetchKeysFlag = "--l2-prefetch-keys";

}  // namespace splitkv::plan
