// Parameters of the mixed route's two small kernels (docs/MIXED_BATCH.md, "The mixed route"): a
// serving step's varlen batch over one decode cache is served by the decode kernels for its decode
// rows (single-query and speculative rows in two parts) and by the chunked-prefill kernels for its
// chunks, side by side. The split kernel runs first: per sequence it decides the part and its slot
// there (a part's members take its first slots, in sequence order, so that the decode kernels'
// first blocks are the real ones and spread over every SM), writes each part's lengths (slots past
// the members get length 0) and the member's block-table row, and copies a decode row's
// queries into its slot of the part's padded batch; the merge kernel runs after all parts and
// copies the decode rows' outputs into the call's rows. Plain host/device struct, no CUDA types.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace splitkv::detail {

enum class MixedRouteStage : int32_t { kSplit = 0, kMerge = 1 };

// One decode part of the route: the sequences of q_min..q_max queries, served by one decode plan
// over a padded batch of slots (workspace, contiguous): q and out [batch, q_max, Hq, D], lse [batch,
// Hq, q_max]; the part's j-th member (in sequence order) is slot j, its queries at the slot's last
// q_b positions (bottom-right, as the decode kernels align a sequence's queries), zeros before
// them. Slots past the members have length 0 (their queries, table rows and outputs are never
// read). q_max 0: the part is absent.
struct MixedDecodePart {
  int q_min = 1, q_max = 0;
  void* q = nullptr;
  const void* out = nullptr;
  const float* lse = nullptr;
  int32_t* seq_lens = nullptr;     // [batch]: a member's seq_lens[b] at its slot, else 0
  int32_t* block_table = nullptr;  // [batch, table_pages]: a member's block-table row at its slot
};

// Part 0: single-query sequences (the decode kernels' narrowest tile); part 1: 2..decode_q queries
// (speculative rows, the 16-row tile).
inline constexpr int kMixedDecodeParts = 2;

struct MixedRouteParams {
  MixedRouteStage stage = MixedRouteStage::kSplit;
  // The step: sequence b has cu_seqlens_q[b + 1] - cu_seqlens_q[b] queries over seq_lens[b] keys.
  const int32_t* cu_seqlens_q = nullptr;  // [batch + 1]
  const int32_t* seq_lens = nullptr;      // [batch]
  int batch = 0, num_q_heads = 0, head_dim = 0;
  int64_t total_q = 0;  // query tokens in q (bound of cu_seqlens_q)
  int max_kv_len = 0;
  // The call's queries and outputs, varlen: q, out [total_q, Hq, D]; lse [Hq, total_q] or null.
  // Element strides.
  const void* q = nullptr;
  int64_t q_token_stride = 0, q_head_stride = 0;
  void* out = nullptr;
  int64_t o_token_stride = 0, o_head_stride = 0;
  float* lse = nullptr;
  int64_t lse_head_stride = 0, lse_token_stride = 0;
  // The call's paged cache: block_table [batch, >= table_pages] int32 with its row stride in
  // elements, table_pages = ceil(max_kv_len / page_size). (No *_kc cache takes the route: the
  // decode kernels do not read one, so no k_tail row needs a slot.)
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0, table_pages = 0;
  MixedDecodePart parts[kMixedDecodeParts];
  int32_t* slots = nullptr;             // [batch]: a decode row's slot in its part (split writes, merge reads)
  int32_t* prefill_seq_lens = nullptr;  // [batch]: 0 for a decode row, else seq_lens[b]
  int32_t* prefill_skip = nullptr;      // [batch]: 1 for a decode row (PrefillParams::skip_sequences)
  // [1]: the blocks of the prefill part's persistent grid that walk its tiles this step
  // (PrefillParams::active_blocks): blocks_beside where the step has decode rows, else
  // blocks_alone (the whole grid). nullptr: the prefill part keeps its grid (serial, or no
  // persistent grid).
  int32_t* prefill_blocks = nullptr;
  int prefill_blocks_beside = 0, prefill_blocks_alone = 0;
};

// The decode part serving sequence b, or -1 (the prefill part): 1..q_max queries inside the q
// tensor over a length the decode kernels take (q_b <= n_b <= max_kv_len), in a present part's
// range. A sequence with bad lengths stays with the prefill kernels, which write its rows as NaN.
SPLITKV_HD int mixed_decode_part(const MixedRouteParams& p, int b) {
  const int64_t q0 = p.cu_seqlens_q[b], q1 = p.cu_seqlens_q[b + 1];
  const int64_t q_len = q1 - q0, n = p.seq_lens[b];
  if (q0 < 0 || q1 > p.total_q || q_len < 1 || n < q_len || n > p.max_kv_len) return -1;
  for (int k = 0; k < kMixedDecodeParts; ++k) {
    if (p.parts[k].q_max > 0 && q_len >= p.parts[k].q_min && q_len <= p.parts[k].q_max) return k;
  }
  return -1;
}

// Members of each decode part among sequences first, first + stride, ... < batch: those before
// sequence b (b's slot in its part) and all of them (the part's first empty slot). The split
// kernel's threads each count a stride and add up; the host tests count with stride 1.
struct MixedMemberCount {
  int before[kMixedDecodeParts] = {};
  int total[kMixedDecodeParts] = {};
};
SPLITKV_HD MixedMemberCount mixed_member_count(const MixedRouteParams& p, int b, int first, int stride) {
  MixedMemberCount c;
  for (int i = first; i < p.batch; i += stride) {
    const int k = mixed_decode_part(p, i);
    if (k < 0) continue;
    ++c.total[k];
    if (i < b) ++c.before[k];
  }
  return c;
}

inline constexpr int kMixedRouteThreads = 256;

}  // namespace splitkv::detail
