#include "testing/decode_check.hpp"

namespace splitkv::testing {

Comparison check_decode(DecodeCase& c) {
  const DecodeTensors host = c.host_tensors();
  const ref::Result exact = ref::decode(c.problem, host);
  const ref::Result low = ref::decode(c.problem, host, ref::Options{ref::Method::kLowPrecision});
  return compare_with_reference(exact, low, dense_values(host.out), dense_values(host.lse));
}

}  // namespace splitkv::testing
