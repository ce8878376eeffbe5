// The causal rule, aligned bottom-right, in one definition for every kernel, the CPU backend and
// the fp64 reference: query i (0-based) of a sequence with q_len queries and kv_len keys sees keys
// [0, visible_key_end). With q_len == kv_len this is the usual lower triangle; with q_len < kv_len
// (decode, chunked prefill) the last query sees every key; with q_len > kv_len the first
// q_len - kv_len queries see none.
#pragma once

#include "common/host_device.hpp"

namespace splitkv::detail {

SPLITKV_HD int visible_key_end(bool causal, int q_len, int kv_len, int i) {
  if (!causal) return kv_len;
  const int end = kv_len - q_len + i + 1;
  return end < 0 ? 0 : (end > kv_len ? kv_len : end);
}

// The same rule for a shard of a longer context: the shard holds kv_len keys and keys_after (>= 0)
// more keys of the context follow it, so query i sees the shard's keys [0, end) with
// end = (kv_len + keys_after) - q_len + i + 1, clamped to [0, kv_len].
SPLITKV_HD int visible_shard_key_end(bool causal, int q_len, int kv_len, int keys_after, int i) {
  if (!causal) return kv_len;
  const long long end = (long long)kv_len + keys_after - q_len + i + 1;
  return end < 0 ? 0 : (end > kv_len ? kv_len : int(end));
}

}  // namespace splitkv::detail
