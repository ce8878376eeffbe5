// The softmax scale a problem asks for: its own, or 1/sqrt(head_dim) when it says 0. One spelling
// for the planner, the fp64 reference and the CPU backend.
#pragma once

#include <cmath>

namespace splitkv::detail {

inline float resolved_softmax_scale(float softmax_scale, int head_dim) {
  return softmax_scale != 0.f ? softmax_scale : 1.f / std::sqrt(static_cast<float>(head_dim));
}

}  // namespace splitkv::detail
