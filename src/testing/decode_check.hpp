// The decode correctness check shared by tests and `splitkv verify`.
#pragma once

#include <string>

#include "splitkv/status.hpp"
#include "testing/compare.hpp"
#include "testing/decode_case.hpp"

namespace splitkv::testing {

// Compares c.out / c.lse (already holding a kernel's results) with the fp64 reference.
Comparison check_decode(DecodeCase& c);

// The tensor or field a status names, without its member or index (sinks.shape[0] -> sinks).
inline std::string argument_root(const Status& s) {
  const std::string& a = s.argument();
  return a.substr(0, a.find_first_of(".["));
}

}  // namespace splitkv::testing
