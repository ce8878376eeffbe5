// Two fp64 computations of the same attention (reference methods, merged shards) agree to 1e-12:
// infinities (empty rows' LSE) must match exactly and NaN never appears.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "reference/reference.hpp"

namespace splitkv::testing {

constexpr double kFp64Agree = 1e-12;

inline double max_fp64_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      EXPECT_EQ(a[i], b[i]) << "at " << i;
      continue;
    }
    EXPECT_FALSE(std::isnan(a[i]) || std::isnan(b[i])) << "NaN at " << i;
    m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

inline void expect_results_agree(const ref::Result& want, const ref::Result& got, const std::string& what) {
  EXPECT_LE(max_fp64_diff(want.out, got.out), kFp64Agree) << what;
  EXPECT_LE(max_fp64_diff(want.lse, got.lse), kFp64Agree) << what;
}

}  // namespace splitkv::testing
