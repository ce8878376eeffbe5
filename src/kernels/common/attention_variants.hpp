// The attention variants' rules, in one definition for every kernel that implements them, the CPU
// backend and the fp64 reference (docs/VARIANTS.md): which keys a query sees under a sliding window
// and a tree mask, and the logit softcap. Positions are 0-based in the sequence's keys; the queries
// of a sequence are its last keys' positions (bottom-right), so query i of q_len over n keys sits at
// position n - q_len + i.
#pragma once

#include <math.h>

#include "common/host_device.hpp"

namespace splitkv::detail {

// Sliding window: the query at `position` sees keys [window_first_key, window_key_end): from
// position - left (left >= 0; -1: from key 0) to position + right inclusive (right >= 0; -1: to the
// last key), clamped to [0, n_keys]. Causal masking is right = 0.
SPLITKV_HD long long window_first_key(long long position, int left) {
  if (left < 0) return 0;
  const long long first = position - left;
  return first < 0 ? 0 : first;
}

// The first key any of a call's q_len queries sees under a left window: the first query's, at local
// position len + keys_after - q_len (a context shard's keys are [0, len)), clamped to [0, len].
SPLITKV_HD int first_visible_key(int len, int keys_after, int q_len, int left) {
  const long long first = window_first_key((long long)len + keys_after - q_len, left);
  return first > len ? len : int(first);
}

SPLITKV_HD long long window_key_end(long long position, int right, long long n_keys) {
  if (right < 0) return n_keys;
  const long long end = position + right + 1;
  return end < 0 ? 0 : (end > n_keys ? n_keys : end);
}

// Logit softcap: a scaled score s becomes cap * tanh(s / cap); cap <= 0 leaves it unchanged.
SPLITKV_HD float softcapped(float s, float cap) { return cap > 0.f ? cap * tanhf(s / cap) : s; }
SPLITKV_HD double softcapped(double s, double cap) { return cap > 0.0 ? cap * tanh(s / cap) : s; }

// Tree mask over a speculative row's draft tokens (the last q_len keys): row i's bytes hold bit j
// (bit j % 8 of byte j / 8, little bit order as numpy.packbits(bitorder="little")) set when query i
// sees draft token j. The keys before the drafts are not masked by it.
SPLITKV_HD bool tree_mask_sees(const unsigned char* row_bits, int draft) {
  return (row_bits[draft >> 3] >> (draft & 7)) & 1;
}

// The prefill kernels hold a row's tree-mask bits in one 64-bit word: a decode problem served by
// chunked prefill takes a tree mask over at most this many drafts (q_len); the decode kernels take any.
inline constexpr int kMaxPrefillTreeDrafts = 64;

// A sink logit folded once into a merged row whose keys' log-sum-exp is *lse: *lse becomes
// log(exp(*lse) + exp(sink)) and the returned weight exp(old - new) is what the row's O keeps. A NaN
// *lse stays (weight 1); a NaN sink makes the row NaN; -inf is no sink; +inf takes the whole row.
template <class T>
SPLITKV_HD T fold_sink(T sink, T* lse) {
  if (isnan(*lse) || (isinf(sink) && sink < 0)) return T(1);
  if (isnan(sink)) {
    *lse = sink;
    return sink;
  }
  const T hi = *lse > sink ? *lse : sink;
  const T total = isinf(hi) ? hi : hi + log(exp(*lse - hi) + exp(sink - hi));
  const T weight = isinf(*lse) && *lse < 0 ? T(0) : exp(*lse - total);
  *lse = total;
  return weight;
}

// Bytes of one query's row of a tree mask over q_len drafts.
SPLITKV_HD int tree_mask_row_bytes(int q_len) { return (q_len + 7) / 8; }

}  // namespace splitkv::detail
