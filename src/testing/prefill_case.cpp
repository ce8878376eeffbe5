#include "testing/prefill_case.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "reference/reference.hpp"
#include "testing/random_fill.hpp"

namespace splitkv::testing {

PrefillTensors PrefillCase::host_tensors() {
  PrefillTensors t;
  t.q = q_ref;
  t.q.data = q.data();
  t.k = k_ref;
  t.k.data = k.data();
  t.v = v_ref;
  t.v.data = v.data();
  t.out = out_ref;
  t.out.data = out.data();
  t.lse = lse_ref;
  t.lse.data = lse.data();
  if (problem.varlen) {
    t.cu_seqlens_q = TensorRef::contiguous(cu_seqlens_q.data(), DType::kI32, {problem.batch + 1});
    t.cu_seqlens_k = TensorRef::contiguous(cu_seqlens_k.data(), DType::kI32, {problem.batch + 1});
    t.cu_seqlens_q_host = cu_seqlens_q.data();
    t.cu_seqlens_k_host = cu_seqlens_k.data();
  }
  if (problem.sinks) t.sinks = TensorRef::contiguous(sinks.data(), DType::kF32, {problem.num_q_heads});
  return t;
}

namespace {

// [tokens..., H(+pad), D] with the padding head slot (if any) left out of the view.
TensorRef token_major(DType dtype, std::vector<int64_t> lead, int64_t heads, int64_t d, int64_t pad) {
  const int64_t token_stride = (heads + pad) * d;
  if (lead.size() == 1) return TensorRef::strided(nullptr, dtype, {lead[0], heads, d}, {token_stride, d, 1});
  return TensorRef::strided(nullptr, dtype, {lead[0], lead[1], heads, d}, {lead[1] * token_stride, token_stride, d, 1});
}

void poison_rows(std::vector<uint16_t>& data, int64_t first_row, int64_t rows, int64_t row_elems, DType dtype) {
  std::fill_n(data.begin() + first_row * row_elems, rows * row_elems, nan_bits(dtype));
}

void poison_rows(ElementBuffer& data, int64_t first_row, int64_t rows, int64_t row_elems) {
  data.fill_nan(size_t(first_row * row_elems), size_t(rows * row_elems));
}

}  // namespace

PrefillCaseSpec padded_prefill_spec(int batch, int hq, int hkv, int lq, int lk, bool causal, int head_dim,
                                    DType dtype) {
  PrefillCaseSpec s;
  PrefillProblem& p = s.problem;
  p.batch = batch;
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = head_dim;
  p.max_q_len = lq;
  p.max_kv_len = lk;
  p.causal = causal;
  p.dtype = dtype;
  return s;
}

PrefillCaseSpec varlen_prefill_spec(int hq, int hkv, std::vector<int> q_lens, std::vector<int> kv_lens, bool causal,
                                    int head_dim, DType dtype) {
  PrefillCaseSpec s = padded_prefill_spec(int(q_lens.size()), hq, hkv, 1, 0, causal, head_dim, dtype);
  s.problem.varlen = true;
  for (int l : q_lens) s.problem.max_q_len = std::max(s.problem.max_q_len, l);
  for (int l : kv_lens) s.problem.max_kv_len = std::max(s.problem.max_kv_len, l);
  s.q_lens = std::move(q_lens);
  s.kv_lens = std::move(kv_lens);
  return s;
}

PrefillCase make_prefill_case(const PrefillCaseSpec& spec) {
  PrefillCase c;
  const PrefillProblem& p = spec.problem;
  c.problem = p;
  std::mt19937_64 rng(spec.seed);
  const int64_t B = p.batch, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  const int64_t pad = spec.strided ? 1 : 0;
  constexpr int64_t kUnusedTokens = 3;  // varlen: tokens past the last sequence
  int64_t q_tokens, k_tokens;
  if (p.varlen) {
    c.cu_seqlens_q.assign(1, 0);
    c.cu_seqlens_k.assign(1, 0);
    for (int64_t b = 0; b < B; ++b) {
      c.cu_seqlens_q.push_back(c.cu_seqlens_q.back() + spec.q_lens.at(b));
      c.cu_seqlens_k.push_back(c.cu_seqlens_k.back() + spec.kv_lens.at(b));
    }
    q_tokens = c.cu_seqlens_q.back() + kUnusedTokens;
    k_tokens = c.cu_seqlens_k.back() + kUnusedTokens;
    c.q_ref = token_major(p.dtype, {q_tokens}, Hq, D, pad);
    c.k_ref = token_major(p.dtype, {k_tokens}, Hkv, D, pad);
    c.lse_ref = TensorRef::contiguous(nullptr, DType::kF32, {Hq, q_tokens});
  } else {
    q_tokens = B * p.max_q_len;
    k_tokens = B * p.max_kv_len;
    c.q_ref = token_major(p.dtype, {B, p.max_q_len}, Hq, D, pad);
    c.k_ref = token_major(p.dtype, {B, p.max_kv_len}, Hkv, D, pad);
    c.lse_ref = TensorRef::contiguous(nullptr, DType::kF32, {B, Hq, p.max_q_len});
  }
  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype));
  c.k_ref.dtype = kv.k_element;
  c.v_ref = c.k_ref;
  c.v_ref.dtype = kv.v_element;
  c.out_ref = c.q_ref;
  c.q.resize(size_t(q_tokens * (Hq + pad) * D));
  c.k = ElementBuffer(kv.k_element, size_t(k_tokens * (Hkv + pad) * D));
  c.v = ElementBuffer(kv.v_element, c.k.size());
  c.out.resize(c.q.size());
  c.lse.resize(size_t(q_tokens * Hq));
  fill_normal(c.q, p.dtype, rng, spec.q_scale);
  c.k.fill_normal(rng);
  c.v.fill_normal(rng);
  if (spec.poison_unused) {
    if (p.varlen) {
      poison_rows(c.q, c.cu_seqlens_q.back(), kUnusedTokens, (Hq + pad) * D, p.dtype);
      poison_rows(c.k, c.cu_seqlens_k.back(), kUnusedTokens, (Hkv + pad) * D);
      poison_rows(c.v, c.cu_seqlens_k.back(), kUnusedTokens, (Hkv + pad) * D);
    }
    for (int64_t tok = 0; tok < q_tokens && pad; ++tok) poison_rows(c.q, tok * (Hq + 1) + Hq, 1, D, p.dtype);
    for (int64_t tok = 0; tok < k_tokens && pad; ++tok) {
      poison_rows(c.k, tok * (Hkv + 1) + Hkv, 1, D);
      poison_rows(c.v, tok * (Hkv + 1) + Hkv, 1, D);
    }
  }
  poison_outputs(c);
  if (p.sinks) {  // from their own stream: every other value is that of the plain case
    std::mt19937_64 sink_rng(spec.seed ^ 0x9e3779b97f4a7c15ull);
    std::uniform_real_distribution<float> logit(-3.f, 8.f);
    c.sinks.resize(size_t(p.num_q_heads));
    for (float& s : c.sinks) s = logit(sink_rng);
  }
  return c;
}

void poison_outputs(PrefillCase& c) {
  std::fill(c.out.begin(), c.out.end(), nan_bits(c.problem.dtype));
  std::fill(c.lse.begin(), c.lse.end(), std::numeric_limits<float>::quiet_NaN());
}

Comparison check_prefill(PrefillCase& c) {
  const PrefillTensors host = c.host_tensors();
  const ref::Result exact = ref::prefill(c.problem, host);
  const ref::Result low = ref::prefill(c.problem, host, ref::Options{ref::Method::kLowPrecision});
  const std::vector<double> out = dense_values(host.out), lse = dense_values(host.lse);
  if (!c.problem.varlen) return compare_with_reference(exact, low, out, lse);
  // Varlen: only tokens some sequence owns ([0, cu_seqlens_q[B])) have defined outputs.
  const int64_t Hq = c.problem.num_q_heads, D = c.problem.head_dim, owned = c.cu_seqlens_q.back();
  const int64_t total = int64_t(exact.lse.size()) / Hq;
  ref::Result e, l;
  std::vector<double> o, s;
  e.out.assign(exact.out.begin(), exact.out.begin() + owned * Hq * D);
  l.out.assign(low.out.begin(), low.out.begin() + owned * Hq * D);
  o.assign(out.begin(), out.begin() + owned * Hq * D);
  for (int64_t h = 0; h < Hq; ++h) {
    e.lse.insert(e.lse.end(), exact.lse.begin() + h * total, exact.lse.begin() + h * total + owned);
    s.insert(s.end(), lse.begin() + h * total, lse.begin() + h * total + owned);
  }
  return compare_with_reference(e, l, o, s);
}

}  // namespace splitkv::testing
