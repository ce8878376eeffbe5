#include "plan/mixed_work_list.hpp"

#include <algorithm>

namespace splitkv::plan {

int64_t mixed_max_units(const detail::MixedShape& s) {
  // Prefill tiles: sum over sequences of ceil(R_b / P) <= max_tokens x group / P + max_seqs; decode
  // splits: max_splits per sequence; one kBad unit per sequence at most (a bad one has no other).
  const int64_t tiles = (int64_t(s.max_tokens) * s.group + s.prefill_rows - 1) / s.prefill_rows + s.max_seqs;
  const int64_t splits = int64_t(s.max_seqs) * std::max(1, s.max_splits);
  return int64_t(s.num_kv_heads) * (tiles + splits) + s.max_seqs;
}

std::vector<detail::MixedUnit> mixed_work_list(const detail::MixedShape& s, const int32_t* cu_seqlens_q,
                                               const int32_t* seq_lens, int batch) {
  std::vector<detail::MixedSequence> seqs(batch);
  int64_t prefill = 0, decode = 0;  // units of each side
  for (int b = 0; b < batch; ++b) {
    seqs[b] = detail::mixed_sequence(s, cu_seqlens_q, seq_lens, b);
    (seqs[b].decode ? decode : prefill) += detail::mixed_sequence_units(s, seqs[b]);
  }
  std::vector<detail::MixedUnit> list(size_t(prefill + decode));
  int64_t rank[2] = {0, 0};  // next unit of each side, in sequence order
  for (int b = 0; b < batch; ++b) {
    const bool is_decode = seqs[b].decode;
    for (int k = 0; k < detail::mixed_sequence_units(s, seqs[b]); ++k) {
      const int64_t at = detail::interleave_position(rank[is_decode]++, is_decode, prefill, decode);
      list[size_t(at)] = detail::mixed_unit(s, seqs[b], b, k);
    }
  }
  return list;
}

}  // namespace splitkv::plan
