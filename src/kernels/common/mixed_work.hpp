// The work list of a mixed serving step (docs/MIXED_BATCH.md): one varlen batch over one KV cache
// whose sequences are prefill chunks (many queries) or decode / speculative rows (a few), cut into
// units one persistent launch can run side by side. One definition for the GPU builder (one block,
// inside a captured graph, from the device's cu_seqlens_q and seq_lens), the CPU backend and the
// tests; plain host/device code, no CUDA types.
//
// Sequence b has q_b = cu_seqlens_q[b + 1] - cu_seqlens_q[b] queries at the last q_b of its n_b =
// seq_lens[b] key positions (bottom-right, as every causal rule here) and R_b = q_b x group packed
// rows per KV head (row r = i x group + h, GQA packing as in decode).
//   - A row block of at most decode_max_rows packed rows is a decode row: per KV head its keys are
//     cut into S_b = min(max_splits, ceil(n_b / split_keys)) splits on block_keys edges
//     (split_span), one unit per (KV head, split), each covering all R_b rows; S_b > 1 needs the
//     merge of the splits (its partials in the workspace, by unit).
//   - Otherwise a prefill chunk: per KV head one unit per tile of prefill_rows packed rows, each
//     reading keys [0, the tile's last query's causal end) (or all n_b keys, non-causal).
//   - A sequence whose lengths break the contract (q_b < 0, n_b < q_b, n_b > max_kv_len, queries
//     past max_tokens) gets one kBad unit: its rows, where they lie inside the q tensor, read NaN.
// Units are ordered so that compute-bound and memory-bound work meet on every SM: the list
// alternates prefill tiles and decode units in proportion to their counts (interleave_position),
// each kind in sequence order.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "kernels/common/causal_mask.hpp"
#include "kernels/common/split_rule.hpp"

namespace splitkv::detail {

// The plan's fixed shape of a mixed step (bounds for graph capture and the tiles of both kinds).
struct MixedShape {
  int max_seqs = 0;         // sequences (cu_seqlens_q has max_seqs + 1 entries)
  int max_tokens = 0;       // queries over all sequences
  int max_kv_len = 0;       // keys of any sequence
  int num_kv_heads = 0;
  int group = 1;            // query heads per KV head
  bool causal = true;
  int decode_max_rows = 8;  // packed rows per KV head served as a decode row
  int prefill_rows = 128;   // packed rows per prefill tile
  int split_keys = 4096;    // a decode row's keys per split (before rounding to blocks)
  int max_splits = 1;       // of a decode row
  int block_keys = 64;      // split edges
};

enum class MixedUnitKind : int32_t { kPrefillTile = 0, kDecodeSplit = 1, kBad = 2 };

struct MixedUnit {
  MixedUnitKind kind;
  int32_t b;
  int32_t kv_head;    // kBad: -1
  int32_t row0, rows;  // packed rows [row0, row0 + rows) of the KV head (kBad: 0, 0)
  int32_t key_lo, key_hi;  // keys read
  int32_t split, num_splits;  // a decode row's split and count (1 for the other kinds)
};

// What sequence b contributes.
struct MixedSequence {
  bool bad = false;
  bool decode = false;
  int q_len = 0, n_keys = 0, rows = 0;  // rows: packed per KV head
  int units_per_head = 0;               // tiles or splits (0 for an empty row; 1 kBad unit when bad)
};

SPLITKV_HD MixedSequence mixed_sequence(const MixedShape& s, const int32_t* cu_seqlens_q, const int32_t* seq_lens,
                                        int b) {
  MixedSequence m;
  const long long q0 = cu_seqlens_q[b], q1 = cu_seqlens_q[b + 1];
  const long long q_len = q1 - q0, n = seq_lens[b];
  m.bad = q0 < 0 || q1 > s.max_tokens || q_len < 0 || n < q_len || n > s.max_kv_len;
  if (m.bad) return m;
  m.q_len = int(q_len);
  m.n_keys = int(n);
  m.rows = m.q_len * s.group;
  if (m.rows == 0) return m;  // no queries: nothing to compute
  m.decode = m.rows <= s.decode_max_rows;
  if (m.decode) {
    const int wanted = (m.n_keys + s.split_keys - 1) / s.split_keys;
    m.units_per_head = wanted < 1 ? 1 : (wanted > s.max_splits ? s.max_splits : wanted);
  } else {
    m.units_per_head = (m.rows + s.prefill_rows - 1) / s.prefill_rows;
  }
  return m;
}

// Units of sequence b in the list (kBad: 1).
SPLITKV_HD int mixed_sequence_units(const MixedShape& s, const MixedSequence& m) {
  return m.bad ? 1 : m.units_per_head * s.num_kv_heads;
}

// Unit k (0 <= k < mixed_sequence_units) of sequence b: KV head k / units_per_head, then its tile or split.
SPLITKV_HD MixedUnit mixed_unit(const MixedShape& s, const MixedSequence& m, int b, int k) {
  MixedUnit u{};
  u.b = b;
  u.split = 0;
  u.num_splits = 1;
  if (m.bad) {
    u.kind = MixedUnitKind::kBad;
    u.kv_head = -1;
    return u;
  }
  u.kv_head = k / m.units_per_head;
  const int j = k % m.units_per_head;
  if (m.decode) {
    u.kind = MixedUnitKind::kDecodeSplit;
    u.row0 = 0;
    u.rows = m.rows;
    // The last query (bottom-right) sees every key, causal or not: the splits cut all n_b keys.
    const SplitSpan span = split_span(m.n_keys, j, m.units_per_head, 0, s.block_keys);
    u.key_lo = span.lo;
    u.key_hi = span.end;
    u.split = j;
    u.num_splits = m.units_per_head;
  } else {
    u.kind = MixedUnitKind::kPrefillTile;
    u.row0 = j * s.prefill_rows;
    u.rows = m.rows - u.row0 < s.prefill_rows ? m.rows - u.row0 : s.prefill_rows;
    const int last_query = (u.row0 + u.rows - 1) / s.group;
    u.key_lo = 0;
    u.key_hi = visible_shard_key_end(s.causal, m.q_len, m.n_keys, 0, last_query);
  }
  return u;
}

// Where unit i of a kind lands in the list when `prefill` prefill-side units (prefill tiles and
// kBad units) and `decode` decode units are merged in proportion: unit i of n of its kind sits at
// (2i + 1) / 2n of the list, the other kind's units likewise, ties to the prefill side (compute
// first). The two kinds then alternate as evenly as their counts allow, each in its own order, and
// the positions of all units are a permutation of [0, prefill + decode).
SPLITKV_HD long long interleave_position(long long i, bool is_decode, long long prefill, long long decode) {
  const long long n = is_decode ? decode : prefill;  // this kind's units (> i)
  const long long m = is_decode ? prefill : decode;  // the other kind's
  const long long num = (2 * i + 1) * m;             // other unit j comes first when (2j + 1) n < num
  const long long below = num > 0 ? (num - 1) / n : 0;  // the largest odd candidate o = 2j + 1 with o n < num
  long long before = (below + 1) / 2;
  if (before > m) before = m;
  const long long tie = num % n == 0 ? num / n : 0;  // o n == num: the prefill side first
  if (is_decode && tie % 2 == 1 && tie <= 2 * m - 1) ++before;
  return i + before;
}

}  // namespace splitkv::detail
