#include "reference/row_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/half_convert.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/lse_combine.hpp"
#include "kernels/common/split_rule.hpp"

namespace splitkv::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The scaled (and capped) score of key t.
double score(const RowInput& row, int t) {
  const float* k = row.k + size_t(t) * row.d;
  double s = 0;
  for (int j = 0; j < row.d; ++j) s += double(row.q[j]) * double(k[j]);
  return detail::softcapped(s * row.scale, row.softcap);
}

// Whether the row sees key t: inside [first_visible, n_visible), and among the tree mask's keys only
// those its bits select.
bool visible(const RowInput& row, int t) {
  if (t < row.first_visible || t >= row.n_visible) return false;
  return row.tree_bits == nullptr || t < row.tree_first || detail::tree_mask_sees(row.tree_bits, t - row.tree_first);
}

void write_empty(int d, double* o, double* lse) {
  std::fill(o, o + d, 0.0);
  *lse = kNegInf;
}

// Softmax over the visible keys of [lo, hi), all at once.
void attend_range(const RowInput& row, int lo, int hi, double* o, double* lse) {
  std::vector<double> s(std::max(hi - lo, 0), kNegInf);
  double m = kNegInf;
  for (int t = lo; t < hi; ++t) {
    if (!visible(row, t)) continue;
    s[t - lo] = score(row, t);
    m = std::max(m, s[t - lo]);
  }
  if (m == kNegInf) return write_empty(row.d, o, lse);  // no visible key (or every score -inf)
  double sum = 0;
  std::fill(o, o + row.d, 0.0);
  for (int t = lo; t < hi; ++t) {
    if (s[t - lo] == kNegInf) continue;
    const double p = std::exp(s[t - lo] - m);
    sum += p;
    const float* v = row.v + size_t(t) * row.d;
    for (int j = 0; j < row.d; ++j) o[j] += p * double(v[j]);
  }
  for (int j = 0; j < row.d; ++j) o[j] /= sum;
  *lse = m + std::log(sum);
}

// Chunks of split_chunk_keys() keys, each a partial (O_i, LSE_i), merged in chunk order.
void attend_split(const RowInput& row, const Options& opt, double* o, double* lse) {
  const int chunk = detail::split_chunk_keys(row.n_keys, opt.num_splits, opt.split_tokens, opt.block_keys);
  const int n_chunks = std::max(1, (row.n_keys + chunk - 1) / chunk);
  std::vector<double> part_o(size_t(n_chunks) * row.d), part_lse(n_chunks);
  for (int c = 0; c < n_chunks; ++c) {
    const int lo = c * chunk, hi = std::min(row.n_visible, lo + chunk);
    attend_range(row, lo, hi, &part_o[size_t(c) * row.d], &part_lse[c]);
  }
  *lse = detail::combined_lse(part_lse.data(), n_chunks, 1);
  std::fill(o, o + row.d, 0.0);
  for (int c = 0; c < n_chunks; ++c) {
    const double w = detail::combine_weight(part_lse[c], *lse);
    for (int j = 0; j < row.d; ++j) o[j] += w * part_o[size_t(c) * row.d + j];
  }
}

// The original design's two-pass method: statistics first (scores only), then softmax * V.
void attend_two_pass(const RowInput& row, double* o, double* lse) {
  double m = kNegInf, sum = 0;
  for (int t = 0; t < row.n_visible; ++t) {
    if (!visible(row, t)) continue;
    const double s = score(row, t);
    if (s > m) {
      sum = sum * std::exp(m - s) + 1.0;
      m = s;
    } else {
      sum += std::exp(s - m);
    }
  }
  if (m == kNegInf) return write_empty(row.d, o, lse);
  std::fill(o, o + row.d, 0.0);
  for (int t = 0; t < row.n_visible; ++t) {
    if (!visible(row, t)) continue;
    const double p = std::exp(score(row, t) - m) / sum;
    const float* v = row.v + size_t(t) * row.d;
    for (int j = 0; j < row.d; ++j) o[j] += p * double(v[j]);
  }
  *lse = m + std::log(sum);
}

// What a plain low-precision implementation computes: fp32 scores and softmax, P rounded to the
// input dtype, fp32 accumulation of P*V, output rounded to the input dtype (K/V arrive in the
// input dtype: reference.cpp rounds a quantized cache's values to it for this method).
void attend_low_precision(const RowInput& row, double* o, double* lse) {
  constexpr float kNegInfF = -std::numeric_limits<float>::infinity();
  std::vector<float> s(std::max(row.n_visible, 0), kNegInfF);
  float m = kNegInfF;
  for (int t = 0; t < row.n_visible; ++t) {
    if (!visible(row, t)) continue;
    const float* k = row.k + size_t(t) * row.d;
    float acc = 0.f;
    for (int j = 0; j < row.d; ++j) acc += row.q[j] * k[j];
    s[t] = detail::softcapped(acc * static_cast<float>(row.scale), static_cast<float>(row.softcap));
    m = std::max(m, s[t]);
  }
  if (m == kNegInfF) return write_empty(row.d, o, lse);
  float sum = 0.f;
  for (float& x : s) {
    x = x == kNegInfF ? 0.f : std::exp(x - m);
    sum += x;
  }
  std::vector<float> acc(row.d, 0.f);
  for (int t = 0; t < row.n_visible; ++t) {
    const float p = detail::round_to(s[t] / sum, row.dtype);
    const float* v = row.v + size_t(t) * row.d;
    for (int j = 0; j < row.d; ++j) acc[j] += p * v[j];
  }
  for (int j = 0; j < row.d; ++j) o[j] = detail::round_to(acc[j], row.dtype);
  *lse = double(m) + std::log(double(sum));
}

// A sink s joins the denominator once: LSE' = log(exp(LSE) + exp(s)), O' = O exp(LSE - LSE').
void fold_sink(const RowInput& row, double* o, double* lse) {
  if (!row.has_sink) return;
  const double weight = detail::fold_sink(row.sink, lse);
  for (int j = 0; j < row.d; ++j) o[j] *= weight;
}

}  // namespace

void attend_row(const RowInput& row, const Options& options, double* o, double* lse) {
  switch (options.method) {
    case Method::kDirect: attend_range(row, 0, row.n_visible, o, lse); break;
    case Method::kSplit: attend_split(row, options, o, lse); break;
    case Method::kTwoPass: attend_two_pass(row, o, lse); break;
    case Method::kLowPrecision: attend_low_precision(row, o, lse); break;
  }
  fold_sink(row, o, lse);
  // The yardstick rounds the output it writes: after the sink, as an implementation would.
  if (options.method == Method::kLowPrecision && row.has_sink) {
    for (int j = 0; j < row.d; ++j) o[j] = detail::round_to(float(o[j]), row.dtype);
  }
}

}  // namespace splitkv::ref
