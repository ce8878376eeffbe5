// How a sequence's keys are cut into KV splits. One definition for the planner, the kernels,
// the CPU backend and the reference, so they all split the same way.
#pragma once

#include <cstdint>

#include "kernels/common/fast_divmod.hpp"
#include "common/host_device.hpp"

namespace splitkv::detail {

// Keys per split for a sequence of `len` keys.
//  * split_tokens > 0 (batch-invariant mode): every split is exactly split_tokens keys, so the
//    chunk boundaries of a sequence depend on nothing but its own length.
//  * otherwise the sequence is cut into num_splits even chunks, rounded up to whole KV blocks
//    (trailing splits may then be empty).
// Splits is an int (host) or a FastDivmod (kernels).
template <class Splits>
SPLITKV_HD int split_chunk_keys(int len, const Splits& num_splits, int split_tokens, int block_keys) {
  if (split_tokens > 0) return split_tokens;
  const int per_split = divide(len + divisor_of(num_splits) - 1, num_splits);
  const int rounded = (per_split + block_keys - 1) / block_keys * block_keys;
  return rounded > block_keys ? rounded : block_keys;
}

// Keys [lo, end) of split `split` of a sequence of `len` keys, before any causal limit (trailing
// splits may be empty: lo = end = len).
struct SplitSpan {
  int lo, end;
};
template <class Splits>
SPLITKV_HD SplitSpan split_span(int len, int split, const Splits& num_splits, int split_tokens, int block_keys) {
  const int chunk = split_chunk_keys(len, num_splits, split_tokens, block_keys);
  const int64_t start = int64_t(split) * chunk;
  const int lo = start < len ? int(start) : len;
  return SplitSpan{lo, lo + chunk < len ? lo + chunk : len};
}

// With a sliding window (docs/VARIANTS.md) no query of a call sees the keys before the first query's
// window, so a sequence's splits cut only [split_base, len): the first query's first visible key
// (first_key, 0 without a window) rounded down to a whole KV block, which keeps every split on block
// (and 64-key group) edges. Without a window split_span_from(0, ...) is split_span.
SPLITKV_HD int split_base(int first_key, int block_keys) { return first_key / block_keys * block_keys; }

// The edge a windowed sequence's keys start on in the decode kernels: a whole KV block where splits
// cut the keys (every split on block edges) or keys per channel are read (64-key group edges); a
// 16-key warp sub-tile where one split reads them all, so a short window reads up to 15 keys before
// its first visible one rather than up to 63 (page sizes are multiples of 16: a sub-tile never
// straddles a page). The CPU backend reads the same keys.
inline constexpr int kWindowStartKeys = 16;
template <class Splits>
SPLITKV_HD int window_start_edge(const Splits& num_splits, int split_tokens, int block_keys, bool channel_keys) {
  return divisor_of(num_splits) == 1 && split_tokens == 0 && !channel_keys ? kWindowStartKeys : block_keys;
}

template <class Splits>
SPLITKV_HD SplitSpan split_span_from(int base, int len, int split, const Splits& num_splits, int split_tokens,
                                     int block_keys) {
  const SplitSpan s = split_span(len - base, split, num_splits, split_tokens, block_keys);
  return SplitSpan{base + s.lo, base + s.end};
}

}  // namespace splitkv::detail
