#include "testing/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/host_tensor.hpp"

namespace splitkv::testing {

std::string Comparison::summary() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s: max_err=%.3g (low-precision yardstick %.3g), rel_l2=%.3g, lse_rel=%.3g (yardstick %.3g), bad=%lld",
                passed ? "PASS" : "FAIL", max_abs_err, lowp_max_abs_err, rel_l2_err, lse_max_rel_err,
                lowp_lse_max_rel_err,
                static_cast<long long>(bad_values));
  return buf;
}

Comparison compare_with_reference(const ref::Result& exact, const ref::Result& low_precision,
                                  const std::vector<double>& out, const std::vector<double>& lse) {
  Comparison c;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < exact.out.size(); ++i) {
    const double e = exact.out[i];
    if (!std::isfinite(out[i])) {
      ++c.bad_values;
      continue;
    }
    const double d = std::abs(out[i] - e);
    c.max_abs_err = std::max(c.max_abs_err, d);
    c.lowp_max_abs_err = std::max(c.lowp_max_abs_err, std::abs(low_precision.out[i] - e));
    err2 += d * d;
    ref2 += e * e;
  }
  c.rel_l2_err = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  for (size_t i = 0; i < exact.lse.size() && !lse.empty(); ++i) {
    const double e = exact.lse[i];
    if (std::isinf(e) || std::isinf(lse[i]) || std::isnan(lse[i])) {
      if (!(std::isinf(e) && e < 0 && std::isinf(lse[i]) && lse[i] < 0)) ++c.bad_values;
      continue;
    }
    const double magnitude = std::max(1.0, std::abs(e));
    c.lse_max_rel_err = std::max(c.lse_max_rel_err, std::abs(lse[i] - e) / magnitude);
    if (i < low_precision.lse.size() && std::isfinite(low_precision.lse[i]))
      c.lowp_lse_max_rel_err = std::max(c.lowp_lse_max_rel_err, std::abs(low_precision.lse[i] - e) / magnitude);
  }
  const double lse_tolerance = std::max(1e-3, 2 * c.lowp_lse_max_rel_err + 1e-5);
  c.passed = c.bad_values == 0 && c.max_abs_err <= 2 * c.lowp_max_abs_err + 1e-5 && c.lse_max_rel_err <= lse_tolerance;
  return c;
}

std::vector<double> dense_values(const TensorRef& t) {
  std::vector<double> values;
  values.reserve(size_t(t.numel()));
  int64_t shape[4] = {1, 1, 1, 1};
  const int offset = 4 - t.rank;
  for (int i = 0; i < t.rank; ++i) shape[offset + i] = t.shape[i];
  int64_t stride[4] = {0, 0, 0, 0};
  for (int i = 0; i < t.rank; ++i) stride[offset + i] = t.stride[i];
  for (int64_t a = 0; a < shape[0]; ++a)
    for (int64_t b = 0; b < shape[1]; ++b)
      for (int64_t c = 0; c < shape[2]; ++c)
        for (int64_t d = 0; d < shape[3]; ++d) {
          const int64_t off = a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
          values.push_back(double(detail::load_float(t, off)));
        }
  return values;
}

}  // namespace splitkv::testing
