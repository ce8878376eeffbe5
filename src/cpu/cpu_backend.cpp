#include "cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "validate/validate.hpp"
#include "common/formats.hpp"
#include "plan/geometry.hpp"
#include "plan/plan_seal.hpp"
#include "quant/kv_rows.hpp"
#include "common/host_tensor.hpp"
#include "common/parallel_for.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/causal_mask.hpp"
#include "kernels/common/lse_combine.hpp"
#include "kernels/common/split_rule.hpp"

namespace splitkv::cpu {
namespace {

using detail::element_offset;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// What masks and transforms a row's scores (docs/VARIANTS.md): the softcap, and the tree mask's
// bits over keys [tree_first, ...) (null: none).
struct RowVariants {
  float softcap = 0.f;
  const unsigned char* tree_bits = nullptr;
  int tree_first = 0;
};

// Partial softmax over the keys of [lo, hi) the row sees, for one query row: o normalized, lse
// natural log (-inf and o = 0 when it sees none).
void partial_row(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                 int lo, int hi, int d, float scale, const RowVariants& var, float* o, float* lse) {
  std::fill(o, o + d, 0.f);
  *lse = -std::numeric_limits<float>::infinity();
  if (hi <= lo) return;
  float m = -std::numeric_limits<float>::infinity(), sum = 0.f;
  for (int t = lo; t < hi; ++t) {
    if (var.tree_bits != nullptr && t >= var.tree_first && !detail::tree_mask_sees(var.tree_bits, t - var.tree_first)) {
      continue;
    }
    float s = 0.f;
    for (int j = 0; j < d; ++j) s += q[j] * k[size_t(t) * d + j];
    s = detail::softcapped(s * scale, var.softcap);
    const float m_new = std::max(m, s);
    const float rescale = std::exp(m - m_new);  // exp(-inf) = 0 on the first key
    const float p = std::exp(s - m_new);
    sum = sum * rescale + p;
    for (int j = 0; j < d; ++j) o[j] = o[j] * rescale + p * v[size_t(t) * d + j];
    m = m_new;
  }
  if (sum == 0.f) return;  // every key masked
  for (int j = 0; j < d; ++j) o[j] /= sum;
  *lse = m + std::log(sum);
}

// A sink s joins a merged row's denominator once: LSE' = log(exp(LSE) + exp(s)), O' = O exp(LSE - LSE').
float fold_sink(float sink, float lse, float* o, int d) {
  const float weight = detail::fold_sink(sink, &lse);
  for (int j = 0; j < d; ++j) o[j] *= weight;
  return lse;
}

}  // namespace

Status run_decode(const Plan& plan, const DecodeTensors& t) {
  if (plan.kind() != Plan::Kind::kDecode) return Status::invalid("plan", "a decode plan", "a prefill plan");
  if (Status s = detail::check_plan_seal(plan); !s) return s;
  const DecodeProblem& p = plan.decode();
  if (Status s = detail::validate_decode_tensors(p, t); !s) return s;
  if (Status s = detail::validate_decode_partials(p, plan.num_splits(), t); !s) return s;
  const int D = p.head_dim, Lq = p.q_len, Hq = p.num_q_heads, Hkv = p.num_kv_heads, S = plan.num_splits();
  const int group = Hq / Hkv;
  const float scale = plan::resolved_softmax_scale(p.softmax_scale, D);
  const int64_t rows = int64_t(p.batch) * Hq * Lq;  // row = (b * Hq + hq) * Lq + i
  // Lengths past the plan's max_kv_len are invalid on every route (docs/CONTRACTS.md).
  const int64_t max_len = p.max_kv_len;
  const int32_t* lens = static_cast<const int32_t*>(t.seq_lens.data);
  std::vector<float> part_o(size_t(S) * rows * D), part_lse(size_t(S) * rows);
  std::vector<char> bad_sequence(p.batch, 0);
  const KvFormat format = detail::resolve_kv_format(p.kv_format, p.dtype);
  const quant::KvRowReader k_rows(format, false, t.k, t.k_scales, D, t.k_tail), v_rows(format, true, t.v, t.v_scales, D);

  // Phase 1: one task per (sequence, KV head, split), as one GPU thread block would do.
  detail::parallel_for(int64_t(p.batch) * Hkv * S, [&](int64_t task) {
    const int split = static_cast<int>(task % S);
    const int hkv = static_cast<int>(task / S % Hkv);
    const int b = static_cast<int>(task / S / Hkv);
    int len = lens[b];
    int after = t.keys_after.empty() ? 0 : detail::load_i32(t.keys_after, element_offset(t.keys_after, b));
    if (len < 0 || len > max_len || after < 0) {
      bad_sequence[b] = 1;
      len = 0, after = 0;
    }
    // A *_kc cache's tail slot (tail_slots[b], or b) must lie in k_tail: else NaN in this sequence.
    int64_t tail = 0;
    if (k_rows.channel_keys()) {
      tail = t.tail_slots.empty() ? b : detail::load_i32(t.tail_slots, element_offset(t.tail_slots, b));
      if (tail < 0 || tail >= k_rows.tail_slots()) {
        bad_sequence[b] = 1;
        len = 0, after = 0;
      }
    }
    // With a window the splits cut only the keys some query sees (split_span_from).
    const int edge = detail::window_start_edge(S, plan.split_tokens(), plan.block_n(), k_rows.channel_keys());
    const int base = detail::split_base(detail::first_visible_key(len, after, Lq, p.window_left), edge);
    const detail::SplitSpan span = detail::split_span_from(base, len, split, S, plan.split_tokens(), plan.block_n());
    const int lo = span.lo, hi = span.end;
    std::vector<float> k(size_t(len) * D), v(size_t(len) * D), q(D);
    for (int tok = lo; tok < hi; ++tok) {
      int64_t page = b, slot = tok;
      if (p.page_size > 0) {
        page = detail::load_i32(t.block_table, element_offset(t.block_table, b, tok / p.page_size));
        slot = tok % p.page_size;
        if (page < 0 || page >= t.k.shape[0]) {
          bad_sequence[b] = 1;
          continue;
        }
      }
      k_rows.read(page, slot, hkv, tok, len, tail, &k[size_t(tok) * D]);
      v_rows.read(page, slot, hkv, &v[size_t(tok) * D]);
    }
    for (int i = 0; i < Lq; ++i) {
      // Query i sits at local position len + after - Lq + i (the shard's keys are [0, len)).
      const long long position = (long long)len + after - Lq + i;
      long long end = detail::window_key_end(position, p.window_right, (long long)len + after);
      if (!p.tree_mask) end = std::min<long long>(end, detail::visible_shard_key_end(p.causal, Lq, len, after, i));
      const int visible = int(std::clamp<long long>(end, 0, len));
      const int first = int(std::min<long long>(detail::window_first_key(position, p.window_left), len));
      RowVariants var;
      var.softcap = p.softcap;
      if (p.tree_mask) {
        var.tree_bits = static_cast<const unsigned char*>(t.tree_mask.data) + element_offset(t.tree_mask, b, i);
        var.tree_first = len - Lq;
      }
      for (int h = 0; h < group; ++h) {
        const int hq = hkv * group + h;
        for (int j = 0; j < D; ++j) q[j] = detail::load_float(t.q, element_offset(t.q, b, i, hq, j));
        const int64_t row = (int64_t(b) * Hq + hq) * Lq + i;
        partial_row(q, k, v, std::max(lo, first), std::min(hi, visible), D, scale, var,
                    &part_o[(size_t(split) * rows + row) * D], &part_lse[size_t(split) * rows + row]);
      }
    }
  });

  if (!t.partial_o.empty()) {  // the caller merges: partials in the public layout, row (b * Lq + i) * Hq + hq
    float* po = static_cast<float*>(t.partial_o.data);
    float* pl = static_cast<float*>(t.partial_lse.data);
    detail::parallel_for(rows, [&](int64_t row) {
      const int i = static_cast<int>(row % Lq), hq = static_cast<int>(row / Lq % Hq);
      const int b = static_cast<int>(row / Lq / Hq);
      const int64_t out_row = (int64_t(b) * Lq + i) * Hq + hq;
      for (int s = 0; s < S; ++s) {
        const float* o = &part_o[(size_t(s) * rows + row) * D];
        float* dst = po + (s * rows + out_row) * D;
        for (int j = 0; j < D; ++j) dst[j] = bad_sequence[b] ? kNaN : o[j];
        pl[s * rows + out_row] = bad_sequence[b] ? kNaN : part_lse[size_t(s) * rows + row];
      }
    });
    return Status::success();
  }

  // Phase 2: the combine, splits merged in index order (deterministic).
  float* lse_out = static_cast<float*>(t.lse.data);
  detail::parallel_for(rows, [&](int64_t row) {
    const int i = static_cast<int>(row % Lq), hq = static_cast<int>(row / Lq % Hq);
    const int b = static_cast<int>(row / Lq / Hq);
    float lse = bad_sequence[b] ? kNaN : detail::combined_lse(&part_lse[row], S, rows);
    std::vector<float> o(D, 0.f);
    for (int j = 0; j < D; ++j) {
      for (int s = 0; s < S; ++s) {
        o[j] += detail::combine_term(detail::combine_weight(part_lse[size_t(s) * rows + row], lse),
                                     part_o[(size_t(s) * rows + row) * D + j]);
      }
    }
    if (p.sinks) lse = fold_sink(detail::load_float(t.sinks, element_offset(t.sinks, hq)), lse, o.data(), D);
    for (int j = 0; j < D; ++j) {
      detail::store_float(t.out, element_offset(t.out, b, i, hq, j), bad_sequence[b] ? kNaN : o[j]);
    }
    if (lse_out != nullptr) lse_out[element_offset(t.lse, b, hq, i)] = lse;
  });
  return Status::success();
}

}  // namespace splitkv::cpu
