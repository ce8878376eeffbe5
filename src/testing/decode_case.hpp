// Random decode problems with their host data: used by the tests and by `splitkv verify/bench`.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "splitkv/problem.hpp"
#include "testing/element_buffer.hpp"

namespace splitkv::testing {

// A K or V cache tensor [slabs, slab_tokens, heads, D] (slabs: sequences or pages) over memory laid
// out token-major, [slabs, slab_tokens, head_slots, D], or head-major, [slabs, head_slots,
// slab_tokens, D]; head_slots >= heads leaves unused head rows (padding).
TensorRef kv_cache_ref(void* data, DType dtype, int64_t slabs, int64_t slab_tokens, int64_t heads, int64_t head_slots,
                       int64_t head_dim, bool head_major);

struct DecodeCaseSpec {
  DecodeProblem problem;
  std::vector<int> seq_lens;  // one per sequence; empty: every sequence has max_kv_len keys
  uint64_t seed = 1;
  float q_scale = 1.f;         // > 1 makes the softmax peaked (large scores)
  bool strided = false;        // pad the head dimension: q/k/v/out rows are not contiguous
  // K/V stored head-major, [slabs, Hkv, tokens, D] in memory (FlashInfer's HND; the default is
  // token-major [slabs, tokens, Hkv, D]), described to the API by strides. The values are the same
  // as the token-major case of the same seed.
  bool head_major_kv = false;
  bool poison_unused = true;   // NaN in cache slots past each length, unused pages and padding
  int extra_capacity = 3;      // contiguous KV: capacity beyond max_kv_len
  int extra_pages = 2;         // paged KV: pages no sequence uses
  bool shuffle_pages = true;   // paged KV: block tables in random order
};

// A DecodeCaseSpec by its parts: DecodeSpecBuilder(B, Hq, Hkv, max_len).queries(4, true).paged(16)
// .spec (head dim 128, bf16, one query, contiguous, every sequence at max_len unless told).
struct DecodeSpecBuilder {
  DecodeCaseSpec spec;
  DecodeSpecBuilder(int batch, int hq, int hkv, int max_len) {
    spec.problem.batch = batch;
    spec.problem.num_q_heads = hq;
    spec.problem.num_kv_heads = hkv;
    spec.problem.head_dim = 128;
    spec.problem.max_kv_len = max_len;
  }
  DecodeSpecBuilder& lens(std::vector<int> l) { return spec.seq_lens = std::move(l), *this; }
  DecodeSpecBuilder& head_dim(int d) { return spec.problem.head_dim = d, *this; }
  DecodeSpecBuilder& dtype(DType t) { return spec.problem.dtype = t, *this; }
  DecodeSpecBuilder& format(KvFormat f) { return spec.problem.kv_format = f, *this; }
  DecodeSpecBuilder& paged(int page_size) { return spec.problem.page_size = page_size, *this; }
  DecodeSpecBuilder& queries(int q_len, bool causal) {
    spec.problem.q_len = q_len;
    spec.problem.causal = causal;
    return *this;
  }
  DecodeSpecBuilder& strided(bool on = true) { return spec.strided = on, *this; }
  DecodeSpecBuilder& head_major() { return spec.head_major_kv = true, *this; }
};

// Host storage (Q/O as 16-bit element bits, K/V in the cache's format) plus the layout the
// tensors describe.
struct DecodeCase {
  DecodeProblem problem;
  std::vector<uint16_t> q, out;
  ElementBuffer k, v;                // values, or codes of a quantized format
  ElementBuffer k_scales, v_scales;  // quantized formats: per-head fp32 or per-token fp16 pairs
  TensorRef k_scales_ref, v_scales_ref;
  // *_kc formats: the keys' per-channel group scales are k_scales; each sequence's tail (row b).
  ElementBuffer k_tail;
  TensorRef k_tail_ref;
  std::vector<float> lse;
  std::vector<int32_t> seq_lens, block_table;
  // problem.sinks: a logit per query head (random in [-3, 8]); problem.tree_mask: [B, q_len,
  // ceil(q_len / 8)] bits of a random draft tree per sequence (each draft sees itself and its
  // ancestors; docs/VARIANTS.md). Tests may overwrite either.
  std::vector<float> sinks;
  std::vector<uint8_t> tree_mask;
  TensorRef q_ref, k_ref, v_ref, out_ref;  // shapes/strides; data points into the vectors above
  int64_t max_pages = 0;

  // Tensors over host memory (for the reference and the CPU backend).
  DecodeTensors host_tensors();
};

DecodeCase make_decode_case(const DecodeCaseSpec& spec);

// Copies sequence `from_b`'s queries, keys and values (contiguous KV; codes and per-token scales
// of an INT cache too) into sequence `to_b` of another case with the same heads, head dim and
// format, so both hold the same sequence. (An FP8 cache's per-head scales are the caller's.)
void copy_sequence(const DecodeCase& from, int from_b, DecodeCase& to, int to_b);

// The output bits of sequence b (all its queries and heads), in dense order.
std::vector<uint16_t> sequence_output_bits(const DecodeCase& c, int b);

// Fills `out` and `lse` with NaN: anything a kernel fails to write then fails the comparison.
void poison_outputs(DecodeCase& c);

// bf16, 32/8 heads, D=128, pages of 16 tokens, causal when q_len > 1: the shape of the context-shard
// tests (docs/CONTEXT_SHARDS.md).
DecodeCaseSpec paged_gqa_spec(int q_len, std::vector<int> lens);

// One shard of every sequence of a paged case: keys [lo[b], hi[b]) (lo a multiple of the page
// size) as the shard's own lengths, its block table (the sequence's pages from lo[b] on; the tail
// filled with page 0, never read) and the keys of the context after it.
struct DecodeShard {
  std::vector<int32_t> lens, keys_after, block_table;
};
DecodeShard paged_shard(const DecodeCase& c, const std::vector<int>& lo, const std::vector<int>& hi);

}  // namespace splitkv::testing
