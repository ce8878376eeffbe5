#include "plan/split_heuristic.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace splitkv::plan {

double wave_efficiency(int64_t work_units, int splits, int slots) {
  const double waves = double(work_units) * splits / slots;
  return waves / std::ceil(waves);
}

// Wave-efficiency rule (the one FlashAttention uses): with n blocks on S SMs, a launch runs
// ceil(n / S) waves of which n / S are useful. Take the smallest split count whose efficiency is
// at least good_enough (85% by default) of the best; do not split when the unsplit grid already
// fills the SMs.
int choose_num_splits(int64_t work_units, int kv_blocks, int sm_count, int cap, std::string* why,
                      double good_enough) {
  if (work_units >= int64_t(0.8 * sm_count)) {
    *why = std::to_string(work_units) + " work units already fill the " + std::to_string(sm_count) +
           " SMs: no split";
    return 1;
  }
  const int max_splits = std::max(1, std::min({cap, kv_blocks, sm_count}));
  auto eligible = [&](int s) {
    // A split count that gives the same blocks per split as s-1 only adds empty splits.
    return s == 1 || (kv_blocks + s - 1) / s != (kv_blocks + s - 2) / (s - 1);
  };
  std::vector<double> efficiency(max_splits + 1, 0.0);
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) continue;
    efficiency[s] = wave_efficiency(work_units, s, sm_count);
    best = std::max(best, efficiency[s]);
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (eligible(s) && efficiency[s] >= good_enough * best) {
      *why = "wave efficiency: " + std::to_string(work_units) + " work units x " + std::to_string(s) +
             " splits on " + std::to_string(sm_count) + " SMs";
      return s;
    }
  }
  *why = "no split";
  return 1;
}

int choose_tail_splits(int64_t work_units, int kv_blocks, int slots, int cap) {
  if (work_units < int64_t(0.8 * slots) || work_units >= 2 * int64_t(slots)) return 1;
  const int max_splits = std::max(1, std::min(cap, kv_blocks));
  for (int s = 1; s <= max_splits; ++s) {
    if (wave_efficiency(work_units, s, slots) >= kSlotFillGoodEnough) return s;
  }
  return 1;
}

}  // namespace splitkv::plan
