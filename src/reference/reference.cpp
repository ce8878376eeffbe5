#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/formats.hpp"
#include "common/half_convert.hpp"
#include "common/host_tensor.hpp"
#include "common/parallel_for.hpp"
#include "common/softmax_scale.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/causal_mask.hpp"
#include "kernels/common/lse_combine.hpp"
#include "quant/kv_rows.hpp"
#include "reference/row_attention.hpp"

namespace splitkv::ref {

using detail::element_offset;
using detail::load_float;
using detail::visible_key_end;

namespace {

// Keys, values and queries are gathered as float: exact for fp16/bf16 inputs.
void gather_row(const TensorRef& t, int64_t base_offset, int d, float* dst) {
  for (int j = 0; j < d; ++j) dst[j] = load_float(t, base_offset + j * t.stride[t.rank - 1]);
}

// Sequence b's row of a *_kc cache's k_tail: tail_slots[b], or b without tail_slots.
int64_t tail_slot_of(const TensorRef& tail_slots, int b) {
  return tail_slots.empty() ? b : detail::load_i32(tail_slots, element_offset(tail_slots, b));
}

// The first `len` keys and values of sequence b, KV head hkv, from a decode cache (contiguous, or
// paged through the block table), as the values they stand for (dequantized for quantized formats).
// A *_kc cache's tail slot outside its k_tail makes the keys NaN.
void read_cache(int page_size, const TensorRef& block_table, const TensorRef& tail_slots,
                const quant::KvRowReader& k_rows, const quant::KvRowReader& v_rows, int b, int hkv, int len, int d,
                std::vector<float>* k, std::vector<float>* v) {
  k->assign(size_t(len) * d, 0.f);
  v->assign(size_t(len) * d, 0.f);
  const int64_t tail = k_rows.channel_keys() ? tail_slot_of(tail_slots, b) : 0;
  const bool bad_tail = k_rows.channel_keys() && (tail < 0 || tail >= k_rows.tail_slots());
  for (int tok = 0; tok < len; ++tok) {
    int64_t page = b, slot = tok;
    if (page_size > 0) {
      page = detail::load_i32(block_table, element_offset(block_table, b, tok / page_size));
      slot = tok % page_size;
    }
    if (bad_tail) {
      std::fill_n(&(*k)[size_t(tok) * d], d, std::numeric_limits<float>::quiet_NaN());
    } else {
      k_rows.read(page, slot, hkv, tok, len, tail, &(*k)[size_t(tok) * d]);
    }
    v_rows.read(page, slot, hkv, &(*v)[size_t(tok) * d]);
  }
}

// The variants of one row (docs/VARIANTS.md) in a sequence's local key indices: the keys are the
// context's [offset, offset + len) of `total`, and the row's query sits at global position
// total - q_len + i. tree_bits: the row's tree mask (drafts: the last q_len keys), or null.
void set_variants(RowInput* row, int window_left, int window_right, bool causal, int q_len, int i, int total,
                  int offset, int len, const unsigned char* tree_bits, double softcap, const TensorRef& sinks,
                  int hq) {
  const long long position = (long long)total - q_len + i;
  const long long first = detail::window_first_key(position, window_left) - offset;
  long long end = detail::window_key_end(position, window_right, total);
  if (tree_bits == nullptr) end = std::min<long long>(end, detail::visible_key_end(causal, q_len, total, i));
  row->first_visible = int(std::clamp<long long>(first, 0, len));
  row->n_visible = int(std::clamp<long long>(end - offset, 0, len));
  row->softcap = softcap;
  row->tree_bits = tree_bits;
  row->tree_first = len - q_len;
  row->has_sink = !sinks.empty();
  if (row->has_sink) row->sink = detail::load_float(sinks, element_offset(sinks, hq));
}

// The low-precision yardstick reads K/V in the input dtype: a quantized cache dequantized into it
// (16-bit values are unchanged).
void round_for_method(const Options& options, DType dtype, std::vector<float>* k, std::vector<float>* v) {
  if (options.method != Method::kLowPrecision) return;
  for (std::vector<float>* rows : {k, v}) {
    for (float& x : *rows) x = detail::round_to(x, dtype);
  }
}

}  // namespace

Result decode(const DecodeProblem& p, const DecodeTensors& t, const Options& options) {
  return decode_shard(p, t, Shard{nullptr, nullptr}, options);
}

Result decode_shard(const DecodeProblem& p, const DecodeTensors& t, const Shard& shard, const Options& options) {
  const int D = p.head_dim, Lq = p.q_len, Hq = p.num_q_heads, Hkv = p.num_kv_heads;
  const int group = Hq / Hkv;
  const double scale = detail::resolved_softmax_scale(p.softmax_scale, D);
  Result r;
  r.out.assign(size_t(p.batch) * Lq * Hq * D, 0.0);
  r.lse.assign(size_t(p.batch) * Hq * Lq, 0.0);
  const int32_t* lens = static_cast<const int32_t*>(t.seq_lens.data);
  // K and V as the values the cache stands for (dequantized when the format is quantized).
  const KvFormat format = detail::resolve_kv_format(p.kv_format, p.dtype);
  const quant::KvRowReader k_rows(format, false, t.k, t.k_scales, D, t.k_tail), v_rows(format, true, t.v, t.v_scales, D);

  detail::parallel_for(int64_t(p.batch) * Hkv, [&](int64_t g) {
    const int b = static_cast<int>(g / Hkv), hkv = static_cast<int>(g % Hkv);
    const int len = lens[b];
    // Without a shard the tensors hold the whole context.
    const int offset = shard.key_offset ? shard.key_offset[b] : 0;
    const int total = shard.total_len ? shard.total_len[b] : len;
    std::vector<float> k, v, q(D);
    read_cache(p.page_size, t.block_table, t.tail_slots, k_rows, v_rows, b, hkv, len, D, &k, &v);
    round_for_method(options, p.dtype, &k, &v);
    for (int i = 0; i < Lq; ++i) {
      for (int h = 0; h < group; ++h) {
        const int hq = hkv * group + h;
        gather_row(t.q, element_offset(t.q, b, i, hq), D, q.data());
        RowInput row{q.data(), k.data(), v.data(), len, 0, D, scale, p.dtype};
        const unsigned char* tree =
            p.tree_mask ? static_cast<const unsigned char*>(t.tree_mask.data) + element_offset(t.tree_mask, b, i)
                        : nullptr;
        set_variants(&row, p.window_left, p.window_right, p.causal, Lq, i, total, offset, len, tree, p.softcap,
                     p.sinks ? t.sinks : TensorRef{}, hq);
        attend_row(row, options, &r.out[((size_t(b) * Lq + i) * Hq + hq) * D],
                   &r.lse[(size_t(b) * Hq + hq) * Lq + i]);
      }
    }
  });
  return r;
}

Result prefill(const PrefillProblem& p, const PrefillTensors& t, const Options& options) {
  const int D = p.head_dim, Hq = p.num_q_heads, Hkv = p.num_kv_heads;
  const int group = Hq / Hkv;
  const double scale = detail::resolved_softmax_scale(p.softmax_scale, D);
  const int64_t total_q = p.varlen ? t.q.shape[0] : int64_t(p.batch) * p.max_q_len;
  Result r;
  r.out.assign(size_t(total_q) * Hq * D, 0.0);
  r.lse.assign(size_t(total_q) * Hq, 0.0);
  const int32_t* cu_q = static_cast<const int32_t*>(t.cu_seqlens_q.data);
  const int32_t* cu_k = static_cast<const int32_t*>(t.cu_seqlens_k.data);
  const int32_t* cache_lens = static_cast<const int32_t*>(t.seq_lens.data);
  // Chunked prefill reads a decode cache through the same row reader as decode.
  const KvFormat format = detail::resolve_kv_format(p.kv_format, p.dtype);
  const quant::KvRowReader k_rows(format, false, t.k, t.k_scales, D, t.k_tail), v_rows(format, true, t.v, t.v_scales, D);

  detail::parallel_for(int64_t(p.batch) * Hkv, [&](int64_t g) {
    const int b = static_cast<int>(g / Hkv), hkv = static_cast<int>(g % Hkv);
    // Token ranges of this sequence in the q and k tensors' first (varlen) or second dim.
    const int q_begin = p.varlen ? cu_q[b] : 0;
    const int q_len = p.varlen ? cu_q[b + 1] - cu_q[b] : p.max_q_len;
    std::vector<float> k, v, q(D);
    int k_len = 0;
    if (p.kv_cache) {
      k_len = cache_lens[b];
      read_cache(p.page_size, t.block_table, t.tail_slots, k_rows, v_rows, b, hkv, k_len, D, &k, &v);
      round_for_method(options, p.dtype, &k, &v);
    } else {
      const bool packed = p.varlen;  // varlen K/V: [total_k, Hkv, D] by cu_seqlens_k
      const int k_begin = packed ? cu_k[b] : 0;
      k_len = packed ? cu_k[b + 1] - cu_k[b] : p.max_kv_len;
      k.resize(size_t(k_len) * D);
      v.resize(size_t(k_len) * D);
      for (int tok = 0; tok < k_len; ++tok) {
        const int64_t k_off = packed ? element_offset(t.k, k_begin + tok, hkv) : element_offset(t.k, b, tok, hkv);
        const int64_t v_off = packed ? element_offset(t.v, k_begin + tok, hkv) : element_offset(t.v, b, tok, hkv);
        gather_row(t.k, k_off, D, &k[size_t(tok) * D]);
        gather_row(t.v, v_off, D, &v[size_t(tok) * D]);
      }
    }
    for (int i = 0; i < q_len; ++i) {
      for (int h = 0; h < group; ++h) {
        const int hq = hkv * group + h;
        const int64_t q_off = p.varlen ? element_offset(t.q, q_begin + i, hq) : element_offset(t.q, b, i, hq);
        gather_row(t.q, q_off, D, q.data());
        RowInput row{q.data(), k.data(), v.data(), k_len, 0, D, scale, p.dtype};
        set_variants(&row, p.window_left, p.window_right, p.causal, q_len, i, k_len, 0, k_len, nullptr, p.softcap,
                     p.sinks ? t.sinks : TensorRef{}, hq);
        // Dense output row: padded [B, Lq, Hq, D] / varlen [total_q, Hq, D]; LSE [B, Hq, Lq] / [Hq, total_q].
        const size_t token = p.varlen ? size_t(q_begin + i) : size_t(b) * p.max_q_len + i;
        const size_t lse_index = p.varlen ? size_t(hq) * total_q + q_begin + i
                                          : (size_t(b) * Hq + hq) * p.max_q_len + i;
        attend_row(row, options, &r.out[(token * Hq + hq) * D], &r.lse[lse_index]);
      }
    }
  });
  return r;
}

Result merge_decode_partials(const std::vector<Result>& partials, const DecodeProblem& p) {
  const int D = p.head_dim, Lq = p.q_len, Hq = p.num_q_heads;
  Result r;
  r.out.assign(size_t(p.batch) * Lq * Hq * D, 0.0);
  r.lse.assign(size_t(p.batch) * Hq * Lq, 0.0);
  std::vector<double> lse(partials.size());
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < Hq; ++h) {
      for (int i = 0; i < Lq; ++i) {
        const size_t lse_at = (size_t(b) * Hq + h) * Lq + i, out_at = ((size_t(b) * Lq + i) * Hq + h) * D;
        for (size_t s = 0; s < partials.size(); ++s) lse[s] = partials[s].lse[lse_at];
        const double total = detail::combined_lse(lse.data(), int(lse.size()), 1);
        r.lse[lse_at] = total;
        for (size_t s = 0; s < partials.size(); ++s) {
          const double w = detail::combine_weight(lse[s], total);
          for (int j = 0; j < D; ++j) r.out[out_at + j] += detail::combine_term(w, partials[s].out[out_at + j]);
        }
      }
    }
  }
  return r;
}

}  // namespace splitkv::ref
