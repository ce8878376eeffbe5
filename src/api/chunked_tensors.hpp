// The KV-cache tensors of a decode call as those of the chunked prefill over the same cache (and back,
// for the mixed route's decode part): what
// run_decode passes on for a plan served by chunked prefill (Plan::decode_via_prefill), and what
// the chunked-prefill test cases bind from a decode case.
#pragma once

#include "splitkv/problem.hpp"

namespace splitkv::detail {

// K/V, their scales, lengths and block table, with the host copies of the last two.
inline void bind_decode_cache(const DecodeTensors& dt, PrefillTensors* t) {
  t->k = dt.k;
  t->v = dt.v;
  t->k_scales = dt.k_scales;
  t->v_scales = dt.v_scales;
  t->k_tail = dt.k_tail;
  t->tail_slots = dt.tail_slots;
  t->seq_lens = dt.seq_lens;
  t->block_table = dt.block_table;
  t->seq_lens_host = dt.seq_lens_host;
  t->block_table_host = dt.block_table_host;
}

// The other way (the mixed route's decode part): the cache tensors of a chunked prefill as a
// decode call's, without the host copies (the decode part reads lengths of its own).
inline void bind_prefill_cache(const PrefillTensors& t, DecodeTensors* dt) {
  dt->k = t.k;
  dt->v = t.v;
  dt->k_scales = t.k_scales;
  dt->v_scales = t.v_scales;
  dt->k_tail = t.k_tail;
  dt->tail_slots = t.tail_slots;
  dt->seq_lens = t.seq_lens;
  dt->block_table = t.block_table;
}

}  // namespace splitkv::detail
