// The KV-cache tensors of a decode call as those of the chunked prefill over the same cache (and back,
// for the mixed route's decode part): what
// run_decode passes on for a plan served by chunked prefill (Plan::decode_via_prefill), and what
// the chunked-prefill test cases bind from a decode case.
#pragma once

#include "splitkv/problem.hpp"

namespace splitkv::detail {

// The cache tensors DecodeTensors and PrefillTensors share, by name: K/V, their scales, a *_kc
// cache's tail ring, the lengths and the block table.
template <class From, class To>
void copy_cache_tensors(const From& f, To* t) {
  t->k = f.k;
  t->v = f.v;
  t->k_scales = f.k_scales;
  t->v_scales = f.v_scales;
  t->k_tail = f.k_tail;
  t->tail_slots = f.tail_slots;
  t->seq_lens = f.seq_lens;
  t->block_table = f.block_table;
}

// A decode call's cache as its chunked prefill's, with the host copies of the lengths and pages.
inline void bind_decode_cache(const DecodeTensors& dt, PrefillTensors* t) {
  copy_cache_tensors(dt, t);
  t->seq_lens_host = dt.seq_lens_host;
  t->block_table_host = dt.block_table_host;
}

// The other way (the mixed route's decode part): the cache tensors of a chunked prefill as a
// decode call's, without the host copies (the decode part reads lengths of its own).
inline void bind_prefill_cache(const PrefillTensors& t, DecodeTensors* dt) { copy_cache_tensors(t, dt); }

}  // namespace splitkv::detail
