#include "reference/row_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/half_convert.hpp"
#include "kernels/common/lse_combine.hpp"
#include "kernels/common/split_rule.hpp"

namespace splitkv::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double score(const RowInput& row, int t) {
  const float* k = row.k + size_t(t) * row.d;
  double s = 0;
  for (int j = 0; j < row.d; ++j) s += double(row.q[j]) * double(k[j]);
  return s * row.scale;
}

void write_empty(int d, double* o, double* lse) {
  std::fill(o, o + d, 0.0);
  *lse = kNegInf;
}

// Softmax over keys [lo, hi) (already clipped to the visible ones), all at once.
void attend_range(const RowInput& row, int lo, int hi, double* o, double* lse) {
  if (hi <= lo) return write_empty(row.d, o, lse);
  std::vector<double> s(hi - lo);
  for (int t = lo; t < hi; ++t) s[t - lo] = score(row, t);
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  std::fill(o, o + row.d, 0.0);
  for (int t = lo; t < hi; ++t) {
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
  if (row.n_visible == 0) return write_empty(row.d, o, lse);
  double m = kNegInf, sum = 0;
  for (int t = 0; t < row.n_visible; ++t) {
    const double s = score(row, t);
    if (s > m) {
      sum = sum * std::exp(m - s) + 1.0;
      m = s;
    } else {
      sum += std::exp(s - m);
    }
  }
  std::fill(o, o + row.d, 0.0);
  for (int t = 0; t < row.n_visible; ++t) {
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
  if (row.n_visible == 0) return write_empty(row.d, o, lse);
  std::vector<float> s(row.n_visible);
  for (int t = 0; t < row.n_visible; ++t) {
    const float* k = row.k + size_t(t) * row.d;
    float acc = 0.f;
    for (int j = 0; j < row.d; ++j) acc += row.q[j] * k[j];
    s[t] = acc * static_cast<float>(row.scale);
  }
  const float m = *std::max_element(s.begin(), s.end());
  float sum = 0.f;
  for (float& x : s) {
    x = std::exp(x - m);
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

}  // namespace

void attend_row(const RowInput& row, const Options& options, double* o, double* lse) {
  switch (options.method) {
    case Method::kDirect: return attend_range(row, 0, row.n_visible, o, lse);
    case Method::kSplit: return attend_split(row, options, o, lse);
    case Method::kTwoPass: return attend_two_pass(row, o, lse);
    case Method::kLowPrecision: return attend_low_precision(row, o, lse);
  }
}

}  // namespace splitkv::ref
