// Comparing a kernel's output with the fp64 reference, by the rules of docs/BENCHMARKING.md:
// max |out - ref| <= 2 * (max error of the straightforward low-precision implementation) + 1e-5,
// LSE within 1e-3 relative or within 2x the yardstick's own LSE error (the yardstick reads K in the
// input dtype; a quantized cache dequantized into it moves the scores by that rounding, which a
// prefill kernel's 16-bit MMA cannot avoid), and NaN never passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/reference.hpp"
#include "splitkv/types.hpp"

namespace splitkv::testing {

struct Comparison {
  double max_abs_err = 0;       // kernel vs fp64
  double lowp_max_abs_err = 0;  // plain low-precision implementation vs fp64 (the yardstick)
  double rel_l2_err = 0;        // ||out - ref|| / ||ref||
  double lse_max_rel_err = 0;
  double lowp_lse_max_rel_err = 0;  // the yardstick's LSE vs fp64
  int64_t bad_values = 0;       // NaN/inf where the reference is finite, or LSE -inf mismatches
  bool passed = false;
  std::string summary() const;
};

// out/lse: the kernel's results in the reference's dense layout.
Comparison compare_with_reference(const ref::Result& exact, const ref::Result& low_precision,
                                  const std::vector<double>& out, const std::vector<double>& lse);

// Dense row-major copy of a 16-bit float or fp32 tensor in host memory.
std::vector<double> dense_values(const TensorRef& t);

}  // namespace splitkv::testing
