// The decode correctness check shared by tests and `splitkv verify`.
#pragma once

#include "testing/compare.hpp"
#include "testing/decode_case.hpp"

namespace splitkv::testing {

// Compares c.out / c.lse (already holding a kernel's results) with the fp64 reference.
Comparison check_decode(DecodeCase& c);

}  // namespace splitkv::testing
