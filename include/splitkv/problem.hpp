// Problem descriptions (shapes, the plan's input) and tensor bindings (pointers, the run's input).
#pragma once

#include <cstdint>

#include "splitkv/types.hpp"

namespace splitkv {

// Decode: few queries per sequence (1..16: plain and speculative decoding) against a KV cache.
struct DecodeProblem {
  int batch = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;  // num_q_heads % num_kv_heads == 0 (GQA/MQA)
  int head_dim = 0;      // 64, 128 or 256 (those compiled into this build)
  int q_len = 1;         // queries per sequence, 1..16
  // Upper bound on every seq_lens[b], at most 2^30: the plan (and a CUDA graph captured with it)
  // serves any lengths in [0, max_kv_len]. Must not exceed the cache capacity. A device length past
  // it is invalid on every route: that sequence's O and LSE are NaN (docs/CONTRACTS.md).
  int max_kv_len = 0;
  // 0: contiguous KV [batch, capacity, Hkv, D]. Otherwise paged KV [num_pages, page_size, Hkv, D]
  // with an int32 block table [batch, max_pages]; page_size a multiple of 16 (16..256 tested).
  int page_size = 0;
  // Causal among the q_len queries, aligned bottom-right: query i sees keys
  // [0, seq_len - q_len + i]. Irrelevant when q_len == 1.
  bool causal = false;
  DType dtype = DType::kBF16;  // of Q and O
  KvFormat kv_format = KvFormat::kNative;  // of the K/V cache; native: stored in `dtype`
  float softmax_scale = 0.f;   // 0 means 1/sqrt(head_dim)
  // Attention variants (docs/VARIANTS.md). Query i of a sequence of seq_len keys sits at position
  // p = seq_len - q_len + i (keys_after: of the whole context).
  //  Sliding window (FlashAttention's window_size): p sees keys j with p - window_left <= j and
  //    j <= p + window_right; -1 leaves that side unbounded. With causal, window_right is -1 or 0.
  //  softcap > 0: every scaled score s becomes softcap * tanh(s / softcap) before the softmax.
  //  sinks: DecodeTensors::sinks holds a logit per query head that joins each row's softmax
  //    denominator once and has no value (see there).
  //  tree_mask: DecodeTensors::tree_mask says which of its sequence's last q_len keys (the draft
  //    tokens of speculative decoding) each query sees, in place of the causal rule among them.
  // The GPU serves all four, as do the CPU backend and the fp64 reference.
  int window_left = -1;
  int window_right = -1;
  float softcap = 0.f;
  bool sinks = false;
  bool tree_mask = false;
};

struct DecodeTensors {
  TensorRef q;            // [batch, q_len, Hq, D]
  TensorRef k;            // contiguous [batch, capacity, Hkv, D] or paged [pages, page_size, Hkv, D]
  TensorRef v;            // same shape as k, own strides
  TensorRef seq_lens;     // int32 [batch], device memory, each in [0, max_kv_len] (else NaN in that sequence)
  TensorRef block_table;  // int32 [batch, max_pages], device memory (paged only)
  // Scales of a quantized cache (docs/KV_FORMATS.md); empty for 16-bit caches.
  //  fp8:             float32 [Hkv] per KV head, K and V each their own, any stride with
  //                   (Hkv - 1) * stride < 2^31 (0: one scale for every head) (device memory, so
  //                   a captured graph can take new scales);
  //  int8/int4/k8v4:  float16 (scale, min) per token and KV head, indexed by the same page id
  //                   (or sequence) as k and v: paged [pages, Hkv, page_size, 2], contiguous
  //                   [batch, Hkv, capacity, 2]; strides free, the pair contiguous.
  //  int8_kc/int4_kc/k8v4_kc: v_scales as int8/int4; k_scales float16 (scale[D], then min[D]) per
  //                   KV head and group of 64 positions: paged [pages, Hkv, page_size / 64, 2 * D]
  //                   (page_size a multiple of 64), contiguous [batch, Hkv, ceil(capacity / 64), 2 * D];
  //                   the last dim contiguous.
  // The K and V tensors of a quantized cache hold codes: kFP8E4M3, kI8 (unsigned 0..255) or kI4
  // (unsigned 0..15, two per byte, element 2i in the low nibble; strides count nibbles).
  TensorRef k_scales;
  TensorRef v_scales;
  // *_kc caches only (docs/KV_FORMATS.md, "Keys quantized per channel"): each sequence's newest two
  // groups of keys in 16 bits, k_tail [tail slots, Hkv, 128, D] in the Q/O dtype (position p at row
  // p % 128; the last dim contiguous), device memory; tail_slots: optional int32 [batch], device
  // memory, sequence b's row of k_tail (empty: b). A tail slot outside k_tail gives NaN in that
  // sequence.
  TensorRef k_tail;
  TensorRef tail_slots;
  TensorRef out;          // [batch, q_len, Hq, D], dtype of q (empty when partials are written); no two
                          // elements at one address (outputs' strides are checked for overlap)
  TensorRef lse;          // optional float32 [batch, Hq, q_len] (natural log); empty: not written
  // problem.sinks: float32 [Hq], any stride, device memory: s_h joins the denominator of every row
  // of query head h, O = sum_j exp(S_j) V_j / (exp(s_h) + sum_j exp(S_j)), and the LSE written is
  // log(exp(s_h) + sum_j exp(S_j)) (a row that sees no key: O = 0, LSE = s_h). -inf is no sink.
  // Not with partial_o: a sink enters once, where the final rows are merged (run_combine's sinks).
  TensorRef sinks;
  // problem.tree_mask: uint8 [batch, q_len, ceil(q_len / 8)], device memory, the last dim
  // contiguous: bit j % 8 of byte j / 8 of row (b, i) set when query i sees draft token j (the key
  // at seq_len - q_len + j); numpy.packbits(..., bitorder="little") of a [q_len, q_len] bool mask.
  // The keys before the drafts stay visible (within the window). Not with keys_after.
  TensorRef tree_mask;
  // A shard of a longer context (context parallelism, docs/CONTEXT_SHARDS.md). The cache holds
  // keys [key_offset, key_offset + seq_lens[b]) of each sequence's whole context.
  //  keys_after: optional int32 [batch], device memory: how many of sequence b's keys come after
  //    this shard (context length - key_offset - seq_lens[b], >= 0). Causal masking then counts
  //    global positions: query i sees the context's keys up to position context - q_len + i.
  //    Empty: 0 for every sequence (the shard ends the context, or there is no shard).
  //  partial_o / partial_lse: instead of out and lse, the plan's split partials, fp32, contiguous:
  //    partial_o [num_splits, batch * q_len, Hq, D] (split s, row b * q_len + i: O over the split's
  //    keys, normalized) and partial_lse [num_splits, batch * q_len, Hq] (natural-log LSE, -inf
  //    for a split that sees no key). run_combine merges the partials of several shards.
  //  Both need a plan served by the decode kernels: plan shards with PlanTuning::prefill_route =
  //  false (plan_sharded_decode does); a plan served by chunked prefill refuses them by name.
  TensorRef keys_after;
  TensorRef partial_o;
  TensorRef partial_lse;
  // Optional host copies (same layout). When given, lengths and page ids are checked on the host
  // before launch. Without them the kernel still never reads or writes out of bounds: a sequence
  // with an invalid length or page id gets NaN in its output and LSE instead of a wrong answer.
  const int32_t* seq_lens_host = nullptr;
  const int32_t* block_table_host = nullptr;
};

// Prefill: many queries per sequence; causal aligned bottom-right when Lq < Lk.
struct PrefillProblem {
  int batch = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  // Padded layout: the query/key length of every sequence. Varlen: upper bounds of the lengths.
  int max_q_len = 0;
  int max_kv_len = 0;
  // Varlen: tokens packed as [total, H, D], sequence b spanning [cu_seqlens[b], cu_seqlens[b+1]).
  bool varlen = false;
  bool causal = false;
  DType dtype = DType::kBF16;              // of Q and O
  KvFormat kv_format = KvFormat::kNative;  // of K and V; native: stored in `dtype`
  float softmax_scale = 0.f;  // 0 means 1/sqrt(head_dim)
  // Chunked prefill over a KV cache (kv_cache = true): K and V are a cache in the decode layouts,
  // contiguous [batch, capacity, Hkv, D] (page_size 0) or paged [pages, page_size, Hkv, D] with a
  // block table, in any kv_format decode reads, and sequence b's keys are its first seq_lens[b]
  // tokens there: its prefix and the new chunk, whose K/V the caller appended first (run_append_kv).
  // The queries (padded, or varlen by cu_seqlens_q; varlen applies to the queries only) are that
  // chunk, the last queries of the range: causal aligns them bottom-right, so query i of a chunk of
  // q_len sees keys [0, seq_lens[b] - q_len + i]; a query with no such key (seq_lens[b] < q_len)
  // gets O = 0, LSE = -inf. max_kv_len bounds seq_lens (contiguous: <= capacity).
  bool kv_cache = false;
  int page_size = 0;  // kv_cache: 0 (contiguous) or a multiple of 16
  // Attention variants, as in DecodeProblem (query i of a sequence with q_len queries over k_len
  // keys sits at position k_len - q_len + i): sliding window, softcap, per-head sinks
  // (PrefillTensors::sinks). The GPU serves all three in the one-pass kernels (strategies two-pass
  // and split-V refuse them by name), as do the CPU backend and the fp64 reference.
  int window_left = -1;
  int window_right = -1;
  float softcap = 0.f;
  bool sinks = false;
};

struct PrefillTensors {
  TensorRef q;    // padded [batch, Lq, Hq, D]; varlen [total_q, Hq, D]
  TensorRef k;    // padded [batch, Lk, Hkv, D]; varlen [total_k, Hkv, D]; kv_cache: a decode cache
  TensorRef v;    // like k
  TensorRef out;  // like q
  TensorRef lse;  // optional float32: padded [batch, Hq, Lq]; varlen [Hq, total_q]
  TensorRef cu_seqlens_q;  // int32 [batch + 1], device memory (varlen only)
  TensorRef cu_seqlens_k;  // int32 [batch + 1], device memory (varlen only; never with kv_cache)
  // Optional host copies of the cu_seqlens, checked on the host when given.
  const int32_t* cu_seqlens_q_host = nullptr;
  const int32_t* cu_seqlens_k_host = nullptr;
  // kv_cache only, exactly as in DecodeTensors: seq_lens int32 [batch] (device), block_table int32
  // [batch, max_pages] (paged), the scales of a quantized cache, and optional host copies.
  TensorRef seq_lens;
  TensorRef block_table;
  TensorRef k_scales;
  TensorRef v_scales;
  const int32_t* seq_lens_host = nullptr;
  const int32_t* block_table_host = nullptr;
  TensorRef k_tail;      // *_kc caches: as DecodeTensors::k_tail
  TensorRef tail_slots;  // as DecodeTensors::tail_slots
  TensorRef sinks;  // problem.sinks: float32 [Hq], as DecodeTensors::sinks
};

// Merging split partials given by the caller (e.g. shards of a KV cache attended separately):
//   LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) O_i
// folded in split order, so the result is deterministic. An empty partial (LSE_i = -inf) carries
// weight 0; a row whose partials are all empty gets O = 0 and LSE = -inf; a NaN LSE_i makes the
// row NaN.
struct CombineProblem {
  int num_splits = 0;
  int batch = 0;
  int seq_len = 1;    // query rows per sequence (decode: q_len)
  int num_heads = 0;  // query heads
  int head_dim = 0;
  DType dtype = DType::kBF16;  // of out
  // A sink logit per head joins each merged row once (docs/VARIANTS.md): the way to add sinks to
  // partials computed without them (context shards).
  bool sinks = false;
};

struct CombineTensors {
  // Partial outputs (each normalized over its own keys) and their natural-log LSEs, fp32,
  // contiguous; row (b * seq_len + i) of split s holds query i of sequence b.
  TensorRef partial_o;    // [num_splits, batch * seq_len, num_heads, head_dim]
  TensorRef partial_lse;  // [num_splits, batch * seq_len, num_heads]
  TensorRef out;          // [batch, seq_len, num_heads, head_dim], dtype
  TensorRef lse;          // optional float32 [batch, num_heads, seq_len]; empty: not written
  TensorRef sinks;        // problem.sinks: float32 [num_heads], as DecodeTensors::sinks
};

}  // namespace splitkv
