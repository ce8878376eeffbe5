// Merging partial softmax results. A partial is (O_i, LSE_i): the output normalized over its own
// keys and the natural-log log-sum-exp of its scores (LSE_i = -inf for an empty partial). Then
//   LSE = log sum_i exp(LSE_i)      O = sum_i exp(LSE_i - LSE) * O_i
// always summed in index order, so the result is deterministic. Used by the fp64 reference and
// the CPU backend; the GPU folds the same formula online (kernels/common/combine_state.cuh).
#pragma once

#include <cmath>
#include <limits>

#include "common/host_device.hpp"

namespace splitkv::detail {

SPLITKV_HD float exp_of(float x) { return expf(x); }
SPLITKV_HD double exp_of(double x) { return exp(x); }
SPLITKV_HD float log_of(float x) { return logf(x); }
SPLITKV_HD double log_of(double x) { return log(x); }

template <class T>
SPLITKV_HD T negative_infinity() {
  return -std::numeric_limits<T>::infinity();
}

// LSE of the union of n partials whose LSEs are lse[0], lse[stride], ...; -inf when all are empty.
template <class T>
SPLITKV_HD T combined_lse(const T* lse, int n, long long stride) {
  T max_lse = negative_infinity<T>();
  for (int i = 0; i < n; ++i) max_lse = lse[i * stride] > max_lse ? lse[i * stride] : max_lse;
  if (max_lse == negative_infinity<T>()) return max_lse;
  T sum = 0;
  for (int i = 0; i < n; ++i) sum += exp_of(lse[i * stride] - max_lse);
  return max_lse + log_of(sum);
}

// Weight of a partial in the merged output; 0 for empty partials and when everything is empty.
template <class T>
SPLITKV_HD T combine_weight(T partial_lse, T total_lse) {
  if (total_lse == negative_infinity<T>()) return T(0);
  return exp_of(partial_lse - total_lse);
}

// A partial's term w * O_i of the merged output: 0 when its weight is 0, whatever its O holds (an
// empty partial's O may be uninitialized, NaN or Inf: weight 0 means it takes no part).
template <class T>
SPLITKV_HD T combine_term(T weight, T o) {
  return weight == T(0) ? T(0) : weight * o;
}

}  // namespace splitkv::detail
