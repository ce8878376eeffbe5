// splitkv_quant_accuracy: the accuracy of the quantized KV cache formats, measured on the CPU.
//
// For each data set, KV length and format, attention is computed in fp64 (ref::attend_row, the
// row kernel of the repository's fp64 reference) over the cache as the format stores it
// (quantized, then dequantized by src/quant/kv_quant_host) and compared with fp64 attention over the
// ORIGINAL fp32 values. This is the error of the format itself: the GPU kernels are tested to match
// the reference over the dequantized cache within bf16 tolerances, so the format error dominates.
//
// Formats: bf16 (K and V rounded to bf16, the baseline), fp8 (e4m3, per-KV-head scale
// max|x| / 448 over the cache of that length, K and V separately), int8, int4 (asymmetric per
// (token, KV head), fp16 scale and min), k8v4 (K int8, V int4). The query is never rounded.
//
// Study variants (the design of outlier-robust caches; not formats yet):
//   *_rot       K and V rotated before they are quantized and rotated back after
//               (tools/kv_rotation.hpp: fixed signs, then a normalized Walsh-Hadamard transform), which
//               is what attention with the query rotated and the output rotated back computes;
//   int4_wht    the same rotation without its sign pattern;
//   int4_crot   K and V centered (the per-channel mean of their first 1024 tokens subtracted: the
//               softmax is unchanged and the output moves by a constant), then rotated;
//   *_kc        keys quantized per channel over groups of 64 consecutive tokens (fp16 scale and min
//               per group and channel, as KIVI does), values per token as in the plain format;
//               int4_kc32 with groups of 32. Bytes per token count the per-channel scales (D * 4 / G).
//               Groups of 64 are the *_kc formats' groups (src/quant/kv_quant_kc.hpp; lengths must be
//               multiples of 64, so no key is read from the 16-bit tail).
//   *_sm        keys "smoothed" (SmoothQuant's factors folded into the query): channel c divided by
//               s_c before the per-token round trip, multiplied back after; s_c = the largest norm of
//               channel c's RoPE pair (c, c +- D/2) over the first 256 tokens; int4_sm_ch: s_c = max|k_c|
//               over the first 256 tokens; int4_sm_all: over every token (an oracle).
//
// Data sets (one sequence, Hq query heads, Hkv KV heads, head dim D, q_len 1, non-causal, softmax
// scale 1/sqrt(D)); the first three use the same N(0,1) draws (a fixed seed) and differ only as stated:
//   gaussian     Q, K, V i.i.d. N(0,1).
//   k_outliers   as gaussian, but K channels c_i = (i * D/4 + 11) mod D, i = 0..3 (11, 43, 75, 107
//                at D = 128) multiplied by 20 in every key of every KV head.
//   peaked       as gaussian, but Q multiplied by 8: the scores q.k/sqrt(D) have standard
//                deviation ~8, and the softmax concentrates on a few keys (the report prints the
//                reference's mean largest weight and effective number of keys 1 / sum p^2).
//   rope         keys shaped like a real model's after RoPE: per-channel magnitudes m_c = exp(0.6 z_c),
//                a per-channel mean (massive on three channel pairs: 20 and 12 on two low-frequency
//                pairs, 8 on a high-frequency one, 0.5 z elsewhere), then RoPE (NeoX pairs (i, i + D/2),
//                base 500000) at the token's position; the query likewise (its own magnitudes and
//                means) at position L; values Student-t with 3 degrees of freedom (heavy tails) times
//                per-channel magnitudes exp(0.3 z).
// The cache of length L is the first L tokens of the longest one.
//
// Metrics over all (query head) rows of a (data set, format, length):
//   rel_l2   ||O - O_ref||_2 / ||O_ref||_2 (all rows and channels together),
//   max_abs  max |O - O_ref|,   max_lse  max |LSE - LSE_ref| (natural log of the scaled scores).
//
// Usage: splitkv_quant_accuracy [--lengths 1024,4096,...] [--hq 32] [--hkv 8] [--d 128]
//                               [--seed 20240601] [--json out.json] [--md out.md]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "common/half_convert.hpp"
#include "common/parallel_for.hpp"
#include "kv_rotation.hpp"
#include "quant/kv_quant_host.hpp"
#include "quant/kv_quant_kc.hpp"
#include "reference/reference.hpp"
#include "reference/row_attention.hpp"

namespace {

using namespace splitkv;

// ---- configuration ------------------------------------------------------------------------------

struct Config {
  std::vector<int> lengths{1024, 4096, 16384, 32768, 131072};
  int hq = 32, hkv = 8, d = 128;
  uint64_t seed = 20240601;
  std::string json_path, md_path;
  std::string command;
};

constexpr int kNumOutliers = 4;
constexpr float kOutlierGain = 20.f;
constexpr float kPeakedQScale = 8.f;

enum Dataset { kGaussian, kKOutliers, kPeaked, kRope, kNumDatasets };
const char* dataset_name(int ds) {
  static const char* names[] = {"gaussian", "k_outliers", "peaked", "rope"};
  return names[ds];
}

// Variants: 0 is the fp64 reference over the original values; the others are the formats, their
// rotated versions, and two study variants.
enum Variant {
  kRef, kBf16, kFp8, kInt8, kInt4, kK8V4, kFp8Rot, kInt8Rot, kInt4Rot, kK8V4Rot, kInt4Wht, kInt4CRot, kInt8Kc,
  kInt4Kc, kK8V4Kc, kInt4Kc32, kInt8Sm, kInt4Sm, kK8V4Sm, kInt4SmCh, kInt4SmAll, kNumVariants
};
const char* variant_name(int v) {
  static const char* names[] = {"ref",     "bf16",     "fp8",      "int8",     "int4",     "k8v4",
                                "fp8_rot", "int8_rot", "int4_rot", "k8v4_rot", "int4_wht", "int4_crot",
                                "int8_kc",  "int4_kc",  "k8v4_kc",  "int4_kc32", "int8_sm", "int4_sm",
                                "k8v4_sm",  "int4_sm_ch", "int4_sm_all"};
  return names[v];
}
KvFormat variant_format(int v) {
  switch (v) {
    case kFp8: case kFp8Rot: return KvFormat::kFP8E4M3;
    case kInt8: case kInt8Rot: case kInt8Kc: case kInt8Sm: return KvFormat::kInt8;
    case kInt4: case kInt4Rot: case kInt4Wht: case kInt4CRot: case kInt4Kc: case kInt4Kc32: case kInt4Sm:
    case kInt4SmCh: case kInt4SmAll: return KvFormat::kInt4;
    case kK8V4: case kK8V4Rot: case kK8V4Kc: case kK8V4Sm: return KvFormat::kK8V4;
    default: return KvFormat::kNative;
  }
}
constexpr int kKeyGroup = quant::kKeyGroup;  // tokens per per-channel key scale (*_kc; int4_kc32: 32)
constexpr int kCenterTokens = 1024;  // int4_crot: the per-channel mean of the first tokens is subtracted

// Bytes per token and KV head: the format's, with per-channel key scales for the *_kc variants
// (one fp16 pair per channel and group of tokens instead of one per token).
int64_t variant_bytes(int var, int d) {
  quant::TokenHeadBytes b = quant::token_head_bytes(variant_format(var), d);
  if (var == kInt8Kc || var == kInt4Kc || var == kK8V4Kc) b.k_scales = int64_t(d) * 4 / kKeyGroup;
  if (var == kInt4Kc32) b.k_scales = int64_t(d) * 4 / 32;
  return b.total();
}

std::vector<int> outlier_channels(int d) {
  std::vector<int> c;
  for (int i = 0; i < kNumOutliers; ++i) c.push_back((i * (d / kNumOutliers) + 11) % d);
  return c;
}

// ---- deterministic N(0,1): splitmix64 + Box-Muller (same numbers on every platform and thread count)

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

constexpr double kTwoPi = 6.283185307179586476925286766559;

void fill_normal(uint64_t seed, float* x, size_t n) {
  Rng rng(seed);
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - rng.uniform();  // (0, 1]
    const double u2 = rng.uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    x[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n) x[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

uint64_t stream_seed(uint64_t seed, int tensor, int head) {
  Rng r(seed ^ (uint64_t(tensor) << 32) ^ uint64_t(head) * 0x100000001b3ull);
  r.next();
  return r.next();
}

// ---- the cache as each format reads it back ---------------------------------------------------

// Rows of `n` tokens x `d` values: bf16 rounding and INT8/INT4 round trips are per row, so one pass
// over the longest cache serves every length.
void round_trip_bf16(const float* x, size_t n, int d, float* out) {
  for (size_t i = 0; i < n * size_t(d); ++i) out[i] = detail::round_to(x[i], DType::kBF16);
}

void round_trip_int(const float* x, size_t n, int d, int bits, float* out) {
  std::vector<uint8_t> codes(quant::packed_row_bytes(d, bits));
  for (size_t t = 0; t < n; ++t) {
    const quant::RowScale s = quant::quantize_row_int(x + t * d, d, bits, codes.data());
    quant::dequantize_row_int(codes.data(), d, bits, s, out + t * d);
  }
}

// Every row rotated (with or without the sign pattern), or rotated back.
enum class Rotation { kNone, kSigned, kPlainWht };
void rotate_rows(const float* x, size_t n, int d, Rotation how, float* out) {
  for (size_t t = 0; t < n; ++t) {
    float* row = out + t * d;
    std::copy(x + t * d, x + (t + 1) * d, row);
    if (how == Rotation::kSigned) {
      detail::kv_rotate(row, d);
    } else if (how == Rotation::kPlainWht) {
      detail::walsh_hadamard(row, d);
      for (int c = 0; c < d; ++c) row[c] *= detail::kv_rotation_scale(d);
    }
  }
}
void unrotate_rows(float* x, size_t n, int d, Rotation how) {
  for (size_t t = 0; t < n; ++t) {
    float* row = x + t * d;
    if (how == Rotation::kSigned) {
      detail::kv_unrotate(row, d);
    } else if (how == Rotation::kPlainWht) {
      detail::walsh_hadamard(row, d);
      for (int c = 0; c < d; ++c) row[c] *= detail::kv_rotation_scale(d);
    }
  }
}

// An INT round trip in the rotated space, returned in the original one.
void round_trip_int_rotated(const float* x, size_t n, int d, int bits, Rotation how, float* out) {
  std::vector<float> rotated(n * size_t(d));
  rotate_rows(x, n, d, how, rotated.data());
  round_trip_int(rotated.data(), n, d, bits, out);
  unrotate_rows(out, n, d, how);
}

// Centered and rotated: the per-channel mean of the first kCenterTokens rows is subtracted (attention
// is unchanged by a constant shift of every key; a constant shift of every value moves the output by
// that constant), the rest rotated and quantized, and the mean added back.
void round_trip_int_centered(const float* x, size_t n, int d, int bits, float* out) {
  std::vector<double> mean(size_t(d), 0.0);
  const size_t m = std::min<size_t>(n, kCenterTokens);
  for (size_t t = 0; t < m; ++t)
    for (int c = 0; c < d; ++c) mean[c] += x[t * d + c];
  std::vector<float> centered(n * size_t(d));
  for (size_t t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) centered[t * d + c] = float(x[t * d + c] - mean[c] / double(m));
  round_trip_int_rotated(centered.data(), n, d, bits, Rotation::kSigned, out);
  for (size_t t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) out[t * d + c] = float(out[t * d + c] + mean[c] / double(m));
}

// Per-channel keys (as KIVI quantizes them): every channel quantized (asymmetric, fp16 scale and
// min) over groups of `group` consecutive tokens. Groups of 64 are the *_kc formats' groups as
// src/quant/kv_quant_kc defines them (write_key_group, read_key_code_row; one contiguous sequence,
// every group complete: the lengths measured are multiples of 64, so no key comes from the 16-bit
// tail); other group sizes (int4_kc32) apply the same column rule directly. Like every format here,
// from the fp32 values (not rounded to bf16 first).
void round_trip_int_per_channel(const float* x, size_t n, int d, int bits, int group, float* out) {
  if (group == quant::kKeyGroup && n % quant::kKeyGroup == 0) {
    quant::KcKeyCacheView v;
    v.bits = bits;
    v.head_dim = d;
    v.slots = int64_t(n);
    v.num_blocks = 1;
    v.num_kv_heads = 1;
    std::vector<uint8_t> codes(quant::packed_row_bytes(d, bits) * n);
    std::vector<uint16_t> scales(size_t(v.groups_per_block()) * 2 * d);
    v.codes = codes.data();
    v.code_stride_slot = d;
    v.group_scales = scales.data();
    v.scale_stride_group = 2 * d;
    for (int64_t g = 0; g < v.groups_per_block(); ++g) {
      quant::write_key_group(v, 0, g, 0, x + size_t(g) * quant::kKeyGroup * d);
    }
    for (size_t t = 0; t < n; ++t) quant::read_key_code_row(v, 0, int64_t(t), 0, out + t * d);
    return;
  }
  std::vector<float> column(size_t(group) + 1), back(size_t(group) + 1);
  std::vector<uint8_t> codes(quant::packed_row_bytes(group + 1, bits) + 1);
  for (size_t t0 = 0; t0 < n; t0 += size_t(group)) {
    const int g = int(std::min<size_t>(size_t(group), n - t0));
    for (int c = 0; c < d; ++c) {
      for (int i = 0; i < g; ++i) column[i] = x[(t0 + i) * d + c];
      if (g % 2 != 0) column[g] = column[g - 1];  // INT4 packs pairs: pad with a value already in range
      const quant::RowScale s = quant::quantize_row_int(column.data(), g + g % 2, bits, codes.data());
      quant::dequantize_row_int(codes.data(), g + g % 2, bits, s, back.data());
      for (int i = 0; i < g; ++i) out[(t0 + i) * d + c] = back[i];
    }
  }
}

// Smoothed keys: every channel divided by a factor s_c before the per-token round trip and
// multiplied back after (what attention computes with the query's channel c multiplied by s_c).
// The factors come from the first `calib` tokens: the channel's max |k| (per channel), or the max
// norm of its RoPE pair (i, i + d/2) (pairs: a rotation moves energy within a pair, not out of it).
enum class Smoothing { kPerChannel, kRopePairs };
std::vector<float> smoothing_factors(const float* x, size_t calib, int d, Smoothing how) {
  std::vector<float> s(size_t(d), 0.f);
  for (size_t t = 0; t < calib; ++t)
    for (int c = 0; c < d; ++c) {
      float m = std::fabs(x[t * d + c]);
      if (how == Smoothing::kRopePairs) {
        const int partner = c < d / 2 ? c + d / 2 : c - d / 2;
        m = std::hypot(x[t * d + c], x[t * d + partner]);
      }
      s[c] = std::max(s[c], m);
    }
  for (float& f : s) f = f > 0.f ? f : 1.f;
  return s;
}
void round_trip_int_smoothed(const float* x, size_t n, int d, int bits, const std::vector<float>& s, float* out) {
  std::vector<float> smoothed(n * size_t(d));
  for (size_t t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) smoothed[t * d + c] = x[t * d + c] / s[c];
  round_trip_int(smoothed.data(), n, d, bits, out);
  for (size_t t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) out[t * d + c] *= s[c];
}
constexpr int kSmoothCalibTokens = 256;  // *_sm, int4_sm_ch: factors from the first tokens

// FP8: the per-KV-head scale is max|x| / 448 over the first n tokens, so this depends on n.
float round_trip_fp8(const float* x, size_t n, int d, float* out) {
  float amax = 0.f;
  for (size_t i = 0; i < n * size_t(d); ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax > 0.f ? amax / quant::kE4M3Max : 1.f;
  std::vector<uint8_t> codes(d);
  for (size_t t = 0; t < n; ++t) {
    quant::quantize_row_fp8(x + t * d, d, scale, codes.data());
    quant::dequantize_row_fp8(codes.data(), d, scale, out + t * d);
  }
  return scale;
}

// ---- results ------------------------------------------------------------------------------------

// Per (data set, length, variant, query head): O [d] and LSE, plus reference statistics.
struct Results {
  int nl = 0, hq = 0, d = 0;
  std::vector<double> o, lse;
  std::vector<double> ref_pmax, ref_eff_keys;  // per (data set, length, query head)
  std::vector<double> fp8_scale_k, fp8_scale_v;  // per (data set, length, kv head)

  size_t row(int ds, int li, int var, int h) const {
    return ((size_t(ds) * nl + li) * kNumVariants + var) * hq + h;
  }
  size_t ref_row(int ds, int li, int h) const { return (size_t(ds) * nl + li) * hq + h; }
};

// The reference's largest softmax weight and 1 / sum p^2 for one row (fp64, given its LSE).
void weight_stats(const float* q, const float* k, int n, int d, double scale, double lse,
                  double* pmax, double* eff) {
  double mx = 0, s2 = 0;
  for (int t = 0; t < n; ++t) {
    double s = 0;
    for (int j = 0; j < d; ++j) s += double(q[j]) * double(k[size_t(t) * d + j]);
    const double p = std::exp(s * scale - lse);
    mx = std::max(mx, p);
    s2 += p * p;
  }
  *pmax = mx;
  *eff = 1.0 / s2;
}

// ---- the rope data set ----------------------------------------------------------------------------

constexpr double kRopeBase = 500000.0;

// NeoX-style RoPE of one row at `pos`: pairs (i, i + d/2) rotated by pos * base^(-2i/d).
void apply_rope(float* x, int d, double pos) {
  for (int i = 0; i < d / 2; ++i) {
    const double angle = pos * std::pow(kRopeBase, -2.0 * i / d);
    const double c = std::cos(angle), s = std::sin(angle);
    const double a = x[i], b = x[i + d / 2];
    x[i] = float(a * c - b * s);
    x[i + d / 2] = float(a * s + b * c);
  }
}

// Per-channel magnitudes and means of a rope key or query (before RoPE): three massive channel
// pairs (two of low frequency, one of high), small means elsewhere.
void rope_channels(uint64_t seed, int d, double gain, std::vector<double>* magnitude, std::vector<double>* mean) {
  std::vector<float> z(size_t(2 * d));
  fill_normal(seed, z.data(), z.size());
  magnitude->resize(size_t(d));
  mean->resize(size_t(d));
  for (int c = 0; c < d; ++c) {
    (*magnitude)[c] = std::exp(0.4 * z[c]);
    (*mean)[c] = 0.5 * z[d + c];
  }
  const int half = d / 2;
  (*mean)[half - 3] = 12 * gain;  // low-frequency pairs: nearly constant over thousands of tokens
  (*mean)[half - 9] = -8 * gain;
  (*mean)[2] = 6 * gain;  // a high-frequency pair: turns every few tokens
}

// Rows [0, n) of a rope tensor: magnitude .* (mean + N(0,1)), then RoPE at position first_pos + t.
void fill_rope(uint64_t seed, const std::vector<double>& magnitude, const std::vector<double>& mean, size_t n, int d,
               double first_pos, float* x) {
  fill_normal(seed, x, n * size_t(d));
  for (size_t t = 0; t < n; ++t) {
    float* row = x + t * d;
    for (int c = 0; c < d; ++c) row[c] = float(magnitude[c] * (mean[c] + row[c]));
    apply_rope(row, d, first_pos + double(t));
  }
}

// Student-t values with 3 degrees of freedom (unit variance) times per-channel magnitudes exp(0.3 z).
void fill_heavy_values(uint64_t seed, size_t n, int d, float* x) {
  std::vector<float> chi(n * 3), mag(static_cast<size_t>(d));
  fill_normal(seed, x, n * size_t(d));
  fill_normal(seed ^ 0x5bd1e995ull, chi.data(), chi.size());
  fill_normal(seed ^ 0x27d4eb2full, mag.data(), mag.size());
  for (size_t t = 0; t < n; ++t) {
    const double c2 = double(chi[3 * t]) * chi[3 * t] + double(chi[3 * t + 1]) * chi[3 * t + 1] +
                      double(chi[3 * t + 2]) * chi[3 * t + 2];
    const double scale = 1.0 / std::sqrt(std::max(c2, 1e-6) / 3.0) / std::sqrt(3.0);
    for (int c = 0; c < d; ++c) x[t * d + c] = float(x[t * d + c] * scale * std::exp(0.3 * mag[c]));
  }
}

// ---- one KV head ------------------------------------------------------------------------------------

// Length-independent round trips (per row, or per group of rows) of one K or V tensor.
struct Trips {
  std::vector<float> bf16, i8, i4, i8r, i4r, i4w, i4c, i8kc, i4kc, i4kc32, i8sm, i4sm, i4smch, i4small;
};
Trips make_trips(const std::vector<float>& x, int lmax, int d, bool is_key) {
  const size_t n = x.size();
  Trips r{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
          std::vector<float>(n), {}, {}, {}, {}, {}, {}, {}, {}, {}};
  round_trip_bf16(x.data(), lmax, d, r.bf16.data());
  round_trip_int(x.data(), lmax, d, 8, r.i8.data());
  round_trip_int(x.data(), lmax, d, 4, r.i4.data());
  round_trip_int_rotated(x.data(), lmax, d, 8, Rotation::kSigned, r.i8r.data());
  round_trip_int_rotated(x.data(), lmax, d, 4, Rotation::kSigned, r.i4r.data());
  if (d == 64 || d == 128 || d == 256) {
    r.i4w.resize(n);
    round_trip_int_rotated(x.data(), lmax, d, 4, Rotation::kPlainWht, r.i4w.data());
  }
  if (d == 64 || d == 128 || d == 256) {
    r.i4c.resize(n);
    round_trip_int_centered(x.data(), lmax, d, 4, r.i4c.data());
  }
  if (is_key) {
    r.i8kc.resize(n);
    r.i4kc.resize(n);
    r.i4kc32.resize(n);
    round_trip_int_per_channel(x.data(), lmax, d, 8, kKeyGroup, r.i8kc.data());
    round_trip_int_per_channel(x.data(), lmax, d, 4, kKeyGroup, r.i4kc.data());
    round_trip_int_per_channel(x.data(), lmax, d, 4, 32, r.i4kc32.data());
    const size_t calib = std::min<size_t>(size_t(lmax), kSmoothCalibTokens);
    const std::vector<float> pairs = smoothing_factors(x.data(), calib, d, Smoothing::kRopePairs);
    const std::vector<float> channels = smoothing_factors(x.data(), calib, d, Smoothing::kPerChannel);
    const std::vector<float> all = smoothing_factors(x.data(), size_t(lmax), d, Smoothing::kPerChannel);
    for (auto* v : {&r.i8sm, &r.i4sm, &r.i4smch, &r.i4small}) v->resize(n);
    round_trip_int_smoothed(x.data(), lmax, d, 8, pairs, r.i8sm.data());
    round_trip_int_smoothed(x.data(), lmax, d, 4, pairs, r.i4sm.data());
    round_trip_int_smoothed(x.data(), lmax, d, 4, channels, r.i4smch.data());
    round_trip_int_smoothed(x.data(), lmax, d, 4, all, r.i4small.data());
  }
  return r;
}

void run_kv_head(const Config& cfg, int h, Results* res) {
  const int d = cfg.d, group = cfg.hq / cfg.hkv;
  const int lmax = *std::max_element(cfg.lengths.begin(), cfg.lengths.end());
  const size_t n = size_t(lmax) * d;
  const double softmax_scale = 1.0 / std::sqrt(double(d));
  const bool rotatable = d == 64 || d == 128 || d == 256;

  std::vector<float> fp8_k(n), fp8_v(n), rotated(n);
  std::vector<double> o(d);
  for (int ds = 0; ds < kNumDatasets; ++ds) {
    // The data set's original values (q: one row per query head of the group; rope: per length).
    std::vector<float> k(n), v(n), q(size_t(group) * d);
    std::vector<double> q_mag, q_mean;
    if (ds == kRope) {
      std::vector<double> k_mag, k_mean;
      rope_channels(stream_seed(cfg.seed, 11, h), d, 1.0, &k_mag, &k_mean);
      rope_channels(stream_seed(cfg.seed, 10, h), d, 0.1, &q_mag, &q_mean);
      fill_rope(stream_seed(cfg.seed, 12, h), k_mag, k_mean, size_t(lmax), d, 0.0, k.data());
      fill_heavy_values(stream_seed(cfg.seed, 13, h), size_t(lmax), d, v.data());
    } else {
      fill_normal(stream_seed(cfg.seed, 1, h), k.data(), n);
      fill_normal(stream_seed(cfg.seed, 2, h), v.data(), n);
      fill_normal(stream_seed(cfg.seed, 0, h), q.data(), q.size());
      if (ds == kKOutliers) {
        for (size_t t = 0; t < size_t(lmax); ++t)
          for (int c : outlier_channels(d)) k[t * d + c] *= kOutlierGain;
      }
      if (ds == kPeaked) {
        for (float& x : q) x *= kPeakedQScale;
      }
    }
    const Trips tk = make_trips(k, lmax, d, true), tv = make_trips(v, lmax, d, false);
    for (size_t li = 0; li < cfg.lengths.size(); ++li) {
      const int len = cfg.lengths[li];
      if (ds == kRope) {  // the query at position len, one row per query head of the group
        for (int g = 0; g < group; ++g) {
          fill_rope(stream_seed(cfg.seed, 14, h * group + g), q_mag, q_mean, 1, d, double(len),
                    q.data() + size_t(g) * d);
        }
      }
      const size_t si = (size_t(ds) * cfg.lengths.size() + li) * cfg.hkv + h;
      res->fp8_scale_k[si] = round_trip_fp8(k.data(), len, d, fp8_k.data());
      res->fp8_scale_v[si] = round_trip_fp8(v.data(), len, d, fp8_v.data());
      std::vector<float> fp8r_k, fp8r_v;
      if (rotatable) {  // FP8 of the rotated cache: its per-head scale from the rotated values
        fp8r_k.resize(size_t(len) * d);
        fp8r_v.resize(size_t(len) * d);
        rotate_rows(k.data(), len, d, Rotation::kSigned, rotated.data());
        round_trip_fp8(rotated.data(), len, d, fp8r_k.data());
        unrotate_rows(fp8r_k.data(), len, d, Rotation::kSigned);
        rotate_rows(v.data(), len, d, Rotation::kSigned, rotated.data());
        round_trip_fp8(rotated.data(), len, d, fp8r_v.data());
        unrotate_rows(fp8r_v.data(), len, d, Rotation::kSigned);
      }
      for (int var = 0; var < kNumVariants; ++var) {
        const float *kc = nullptr, *vc = nullptr;
        switch (var) {
          case kRef: kc = k.data(); vc = v.data(); break;
          case kBf16: kc = tk.bf16.data(); vc = tv.bf16.data(); break;
          case kFp8: kc = fp8_k.data(); vc = fp8_v.data(); break;
          case kInt8: kc = tk.i8.data(); vc = tv.i8.data(); break;
          case kInt4: kc = tk.i4.data(); vc = tv.i4.data(); break;
          case kK8V4: kc = tk.i8.data(); vc = tv.i4.data(); break;
          case kFp8Rot: kc = fp8r_k.data(); vc = fp8r_v.data(); break;
          case kInt8Rot: kc = tk.i8r.data(); vc = tv.i8r.data(); break;
          case kInt4Rot: kc = tk.i4r.data(); vc = tv.i4r.data(); break;
          case kK8V4Rot: kc = tk.i8r.data(); vc = tv.i4r.data(); break;
          case kInt4Wht: kc = tk.i4w.data(); vc = tv.i4w.data(); break;
          case kInt4CRot: kc = tk.i4c.data(); vc = tv.i4c.data(); break;
          case kInt8Kc: kc = tk.i8kc.data(); vc = tv.i8.data(); break;
          case kInt4Kc: kc = tk.i4kc.data(); vc = tv.i4.data(); break;
          case kK8V4Kc: kc = tk.i8kc.data(); vc = tv.i4.data(); break;
          case kInt4Kc32: kc = tk.i4kc32.data(); vc = tv.i4.data(); break;
          case kInt8Sm: kc = tk.i8sm.data(); vc = tv.i8.data(); break;
          case kInt4Sm: kc = tk.i4sm.data(); vc = tv.i4.data(); break;
          case kK8V4Sm: kc = tk.i8sm.data(); vc = tv.i4.data(); break;
          case kInt4SmCh: kc = tk.i4smch.data(); vc = tv.i4.data(); break;
          case kInt4SmAll: kc = tk.i4small.data(); vc = tv.i4.data(); break;
        }
        if (kc == nullptr || vc == nullptr || (!rotatable && var >= kFp8Rot && var <= kInt4CRot)) kc = vc = nullptr;
        for (int g = 0; g < group; ++g) {
          const int qh = h * group + g;
          const size_t r = res->row(ds, int(li), var, qh);
          if (kc == nullptr) {  // not measured at this head dim
            std::fill(res->o.begin() + r * d, res->o.begin() + (r + 1) * d, std::nan(""));
            res->lse[r] = std::nan("");
            continue;
          }
          ref::RowInput row{q.data() + size_t(g) * d, kc, vc, len, len, d, softmax_scale, DType::kBF16};
          double lse = 0;
          ref::attend_row(row, ref::Options{}, o.data(), &lse);  // Method::kDirect, fp64
          std::copy(o.begin(), o.end(), res->o.begin() + r * d);
          res->lse[r] = lse;
          if (var == kRef) {
            const size_t rr = res->ref_row(ds, int(li), qh);
            weight_stats(row.q, kc, len, d, softmax_scale, lse, &res->ref_pmax[rr], &res->ref_eff_keys[rr]);
          }
        }
      }
    }
  }
}

// ---- reporting ----------------------------------------------------------------------------------

struct Record {
  int ds, var, len;
  double rel_l2, max_abs, max_lse;
  double o_ref_rms, ref_pmax, ref_eff_keys;
  int64_t bytes_per_token_head;
};

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string today_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

std::string len_label(int len) {
  return len % 1024 == 0 ? std::to_string(len / 1024) + "k" : std::to_string(len);
}

const Record* find(const std::vector<Record>& recs, int ds, int var, int len) {
  for (const Record& r : recs)
    if (r.ds == ds && r.var == var && r.len == len) return &r;
  return nullptr;
}

void write_json(const Config& cfg, const std::vector<Record>& recs, const std::string& date) {
  FILE* f = std::fopen(cfg.json_path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", cfg.json_path.c_str());
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"tool\": \"splitkv_quant_accuracy\",\n  \"command\": \"%s\",\n  \"date\": \"%s\",\n",
               cfg.command.c_str(), date.c_str());
  std::fprintf(f,
               "  \"setup\": {\"head_dim\": %d, \"num_q_heads\": %d, \"num_kv_heads\": %d, \"batch\": 1, "
               "\"q_len\": 1, \"causal\": false, \"softmax_scale\": \"1/sqrt(head_dim)\", \"seed\": %llu, "
               "\"reference\": \"fp64 attention (ref::attend_row, kDirect) over the original fp32 K/V\", "
               "\"measured\": \"fp64 attention over the quantized-then-dequantized K/V; Q never rounded\"},\n",
               cfg.d, cfg.hq, cfg.hkv, (unsigned long long)cfg.seed);
  std::fprintf(f, "  \"records\": [\n");
  for (size_t i = 0; i < recs.size(); ++i) {
    const Record& r = recs[i];
    std::fprintf(f,
                 "    {\"dataset\": \"%s\", \"format\": \"%s\", \"kv_len\": %d, \"rel_l2_o\": %.6e, "
                 "\"max_abs_o\": %.6e, \"max_abs_lse\": %.6e, \"o_ref_rms\": %.6e, "
                 "\"ref_mean_max_weight\": %.6e, \"ref_mean_eff_keys\": %.6e, \"bytes_per_token_head\": %lld}%s\n",
                 dataset_name(r.ds), variant_name(r.var), r.len, r.rel_l2, r.max_abs, r.max_lse, r.o_ref_rms,
                 r.ref_pmax, r.ref_eff_keys, (long long)r.bytes_per_token_head, i + 1 < recs.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

void write_md(const Config& cfg, const std::vector<Record>& recs, const std::string& date, double seconds) {
  FILE* f = std::fopen(cfg.md_path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", cfg.md_path.c_str());
    std::exit(1);
  }
  const std::vector<int> oc = outlier_channels(cfg.d);
  std::fprintf(f, "# Accuracy of the quantized KV cache formats (CPU, fp64)\n\n");
  std::fprintf(f,
               "Generated %s by `tools/quant_accuracy.cpp` (target `splitkv_quant_accuracy`, "
               "%.0f s on %u threads):\n\n```\n%s\n```\n\n",
               date.c_str(), seconds, std::max(1u, std::thread::hardware_concurrency()), cfg.command.c_str());
  std::fprintf(f,
               "**What is measured: the error of the cache format itself.** For each format the cache is "
               "quantized and dequantized by `src/quant/kv_quant_host` (the executable definition of "
               "`docs/KV_FORMATS.md`), and attention over the dequantized K/V is computed in fp64 "
               "(`ref::attend_row`, the row kernel of the fp64 reference in `src/reference/`). It is compared "
               "with fp64 attention over the *original* fp32 values (never rounded). The GPU kernels are tested "
               "to match the reference over the dequantized cache within bf16 tolerances, so in a kernel's "
               "output this format error dominates; kernel rounding (bf16 Q, P and O) is not included here. "
               "The query is never rounded.\n\n");
  std::fprintf(f,
               "Setup: one sequence, Hq = %d, Hkv = %d (GQA group %d), D = %d, q_len 1, non-causal, softmax "
               "scale 1/sqrt(D), seed %llu. The cache of length L is the first L tokens of the longest one.\n\n",
               cfg.hq, cfg.hkv, cfg.hq / cfg.hkv, cfg.d, (unsigned long long)cfg.seed);
  std::fprintf(f, "Formats:\n\n");
  std::fprintf(f, "- `bf16`: K and V rounded to bf16 (nearest even), the baseline of a 16-bit cache.\n");
  std::fprintf(f,
               "- `fp8`: e4m3, per-KV-head fp32 scale = max|x| / 448 over the whole cache of that length, K and "
               "V separately (an ideal calibration; a real one is fixed ahead of time).\n");
  std::fprintf(f, "- `int8`, `int4`: asymmetric per (token, KV head), fp16 (scale, min) per row.\n");
  std::fprintf(f, "- `k8v4`: K as int8, V as int4.\n");
  std::fprintf(f,
               "- study variants (the design of outlier-robust caches, not formats yet): `*_rot`, the format "
               "over a rotated cache (`tools/kv_rotation.hpp`: each K and V row multiplied by a fixed sign per "
               "channel, then a normalized Walsh-Hadamard transform, before it is quantized; attention takes "
               "the rotated query and rotates its output back, i.e. attention over the rows rotated back, "
               "measured here), same bytes; `int4_wht`, the rotation without its sign pattern; `int4_crot`, K "
               "and V centered first (the per-channel mean of their first %d tokens subtracted, which leaves "
               "the softmax unchanged and moves the output by a constant), then rotated; `*_kc`, keys "
               "quantized per channel over groups of %d consecutive tokens (fp16 scale and min per group and "
               "channel, as KIVI does; `int4_kc32`: groups of 32), values per token as in the plain format; "
               "their bytes count the keys' per-channel scales (D x 4 / G per token); groups of %d are the "
               "`*_kc` formats as `src/quant/kv_quant_kc.hpp` defines them; `*_sm`, keys smoothed (SmoothQuant's "
               "factors, folded into the query): channel c divided by s_c before the per-token round trip and "
               "multiplied back after, s_c the largest norm of the channel's RoPE pair (c, c +- D/2) over the "
               "first %d tokens (`int4_sm_ch`: max |k_c| over them; `int4_sm_all`: over every token), same "
               "bytes as the plain format.\n\n",
               kCenterTokens, kKeyGroup, kKeyGroup, kSmoothCalibTokens);
  std::fprintf(f, "Data sets (the first three from the same N(0,1) draws, differing only as stated):\n\n");
  std::fprintf(f, "- `gaussian`: Q, K, V i.i.d. N(0,1).\n");
  std::fprintf(f,
               "- `k_outliers`: as `gaussian`, but K channels %d, %d, %d, %d (of %d) multiplied by %g in every "
               "key of every KV head (Q and V unchanged). The scores are far wider than in `gaussian` "
               "(std ~%.1f instead of ~1).\n",
               oc[0], oc[1], oc[2], oc[3], cfg.d, double(kOutlierGain),
               std::sqrt((double(cfg.d - kNumOutliers) + kNumOutliers * kOutlierGain * kOutlierGain) / cfg.d));
  std::fprintf(f,
               "- `peaked`: as `gaussian`, but Q multiplied by %g: the scores have std ~%g and the softmax "
               "concentrates on a few keys (columns `p_max` and `eff. keys` give the reference's mean largest "
               "weight and mean 1 / sum p^2 over the rows).\n\n",
               double(kPeakedQScale), double(kPeakedQScale));
  std::fprintf(f,
               "- `rope`: keys shaped like a real model's after RoPE: per-channel magnitudes exp(0.6 z), a "
               "per-channel mean that is massive on three channel pairs (20 and -12 on two low-frequency pairs, "
               "8 on a high-frequency one; 0.5 z elsewhere), then RoPE (NeoX pairs (i, i + D/2), base %g) at "
               "the token's position; the query built the same way with its own magnitudes and a quarter of "
               "the means, at position L; values Student-t with 3 degrees of freedom (heavy tails) times "
               "per-channel magnitudes exp(0.3 z).\n\n",
               kRopeBase);
  std::fprintf(f,
               "Metrics over all %d query-head rows: `rel-L2` = ||O - O_ref|| / ||O_ref|| (all rows and channels "
               "together), `max|dO|` = max |O - O_ref|, `max|dLSE|` = max |LSE - LSE_ref| (natural log of the "
               "scaled scores). `O_ref rms` is the RMS of the reference output (it shrinks as the softmax "
               "averages more value rows; so do the errors, which is why rel-L2 hardly depends on the length).\n\n",
               cfg.hq);

  // Targets.
  std::fprintf(f, "## Targets (D = 128, 32k keys, gaussian)\n\n");
  std::fprintf(f, "| format | rel-L2 of O | target | met |\n|---|---|---|---|\n");
  struct T {
    int var;
    double target;
  } targets[] = {{kInt8, 1e-2}, {kFp8, 4e-2}, {kInt4, -1}, {kK8V4, -1}};
  for (const T& t : targets) {
    const Record* r = find(recs, kGaussian, t.var, 32768);
    if (!r || cfg.d != 128) {
      std::fprintf(f, "| %s | (not measured: needs D = 128 and L = 32768) | | |\n", variant_name(t.var));
      continue;
    }
    if (t.target > 0)
      std::fprintf(f, "| %s | %.3e | <= %.0e | %s |\n", variant_name(t.var), r->rel_l2, t.target,
                   r->rel_l2 <= t.target ? "yes" : "**no**");
    else
      std::fprintf(f, "| %s | %.3e | (reported) | - |\n", variant_name(t.var), r->rel_l2);
  }
  std::fprintf(f, "\n");

  // The rotation study and the outlier targets (issue: quantized caches on real keys).
  std::fprintf(f, "## Outlier channels: plain, rotated, per-channel and smoothed caches (32k keys)\n\n");
  std::fprintf(f, "| format | gaussian | k_outliers | rope | peaked |\n|---|---|---|---|---|\n");
  for (int var : {kFp8, kFp8Rot, kInt8, kInt8Rot, kInt8Kc, kInt8Sm, kInt4, kInt4Rot, kInt4Wht, kInt4CRot, kInt4Kc,
                  kInt4Kc32, kInt4Sm, kInt4SmCh, kInt4SmAll, kK8V4, kK8V4Rot, kK8V4Kc, kK8V4Sm}) {
    std::fprintf(f, "| %s |", variant_name(var));
    for (int ds : {kGaussian, kKOutliers, kRope, kPeaked}) {
      const Record* r = find(recs, ds, var, 32768);
      if (r == nullptr) r = find(recs, ds, var, cfg.lengths.back());
      std::fprintf(f, r && std::isfinite(r->rel_l2) ? " %.3e |" : " - |", r ? r->rel_l2 : 0.0);
    }
    std::fprintf(f, "\n");
  }
  std::fprintf(f, "\nrel-L2 of O at 32k keys (or the longest length measured). Targets on `k_outliers` and `rope`: "
                  "int4 <= 0.2, int8 <= 0.02, k8v4 no worse than its own `gaussian` figure, fp8 no worse than "
                  "the plain cache; on `gaussian` no format worse than the plain cache.\n\n");

  // rel-L2 pivot per data set.
  std::fprintf(f, "## rel-L2 of O by length\n\n");
  for (int ds = 0; ds < kNumDatasets; ++ds) {
    std::fprintf(f, "`%s`\n\n| format | bytes/token/head |", dataset_name(ds));
    for (int len : cfg.lengths) std::fprintf(f, " %s |", len_label(len).c_str());
    std::fprintf(f, "\n|---|---|");
    for (size_t i = 0; i < cfg.lengths.size(); ++i) std::fprintf(f, "---|");
    std::fprintf(f, "\n");
    for (int var = 1; var < kNumVariants; ++var) {
      const Record* r0 = find(recs, ds, var, cfg.lengths[0]);
      std::fprintf(f, "| %s | %lld |", variant_name(var), (long long)r0->bytes_per_token_head);
      for (int len : cfg.lengths) std::fprintf(f, " %.2e |", find(recs, ds, var, len)->rel_l2);
      std::fprintf(f, "\n");
    }
    std::fprintf(f, "\n");
  }

  // Full tables.
  std::fprintf(f, "## All metrics\n\n");
  for (int ds = 0; ds < kNumDatasets; ++ds) {
    std::fprintf(f, "### `%s`\n\n", dataset_name(ds));
    std::fprintf(f,
                 "| L | format | rel-L2 | max\\|dO\\| | max\\|dLSE\\| | O_ref rms | p_max | eff. keys |\n"
                 "|---|---|---|---|---|---|---|---|\n");
    for (int len : cfg.lengths)
      for (int var = 1; var < kNumVariants; ++var) {
        const Record* r = find(recs, ds, var, len);
        std::fprintf(f, "| %s | %s | %.3e | %.3e | %.3e | %.3e | %.3g | %.1f |\n", len_label(len).c_str(),
                     variant_name(var), r->rel_l2, r->max_abs, r->max_lse, r->o_ref_rms, r->ref_pmax,
                     r->ref_eff_keys);
      }
    std::fprintf(f, "\n");
  }
  std::fprintf(f,
               "The same records are in the `.json` next to this file (one per data set, format and length).\n");
  std::fclose(f);
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!cur.empty()) v.push_back(std::atoi(cur.c_str()));
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  cfg.command = "splitkv_quant_accuracy";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--lengths") cfg.lengths = parse_list(val());
    else if (a == "--hq") cfg.hq = std::atoi(val());
    else if (a == "--hkv") cfg.hkv = std::atoi(val());
    else if (a == "--d") cfg.d = std::atoi(val());
    else if (a == "--seed") cfg.seed = std::strtoull(val(), nullptr, 10);
    else if (a == "--json") cfg.json_path = val();
    else if (a == "--md") cfg.md_path = val();
    else {
      std::fprintf(stderr,
                   "usage: splitkv_quant_accuracy [--lengths 1024,4096,...] [--hq 32] [--hkv 8] [--d 128] "
                   "[--seed N] [--json out.json] [--md out.md]\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  for (int i = 1; i < argc; ++i) cfg.command += std::string(" ") + argv[i];
  if (cfg.lengths.empty() || cfg.hkv < 1 || cfg.hq % cfg.hkv != 0 || cfg.d < 2 || cfg.d % 2 != 0 ||
      *std::min_element(cfg.lengths.begin(), cfg.lengths.end()) < 1 ||
      std::any_of(cfg.lengths.begin(), cfg.lengths.end(), [](int l) { return l % kKeyGroup != 0; })) {
    std::fprintf(stderr, "invalid shape: need lengths >= 1 and multiples of %d, hq a multiple of hkv, an even d\n",
                 kKeyGroup);
    return 2;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const int nl = int(cfg.lengths.size());
  Results res;
  res.nl = nl;
  res.hq = cfg.hq;
  res.d = cfg.d;
  res.o.assign(size_t(kNumDatasets) * nl * kNumVariants * cfg.hq * cfg.d, 0.0);
  res.lse.assign(size_t(kNumDatasets) * nl * kNumVariants * cfg.hq, 0.0);
  res.ref_pmax.assign(size_t(kNumDatasets) * nl * cfg.hq, 0.0);
  res.ref_eff_keys.assign(size_t(kNumDatasets) * nl * cfg.hq, 0.0);
  res.fp8_scale_k.assign(size_t(kNumDatasets) * nl * cfg.hkv, 0.0);
  res.fp8_scale_v.assign(size_t(kNumDatasets) * nl * cfg.hkv, 0.0);

  // One task per KV head; each writes only its own query heads' rows, so the results do not depend
  // on the thread count, and the reductions below run in a fixed order.
  detail::parallel_for(cfg.hkv, [&](int64_t h) { run_kv_head(cfg, int(h), &res); });

  std::vector<Record> recs;
  for (int ds = 0; ds < kNumDatasets; ++ds)
    for (int li = 0; li < nl; ++li)
      for (int var = 1; var < kNumVariants; ++var) {
        double num = 0, den = 0, max_abs = 0, max_lse = 0, pmax = 0, eff = 0;
        for (int h = 0; h < cfg.hq; ++h) {
          const double* o = &res.o[res.row(ds, li, var, h) * cfg.d];
          const double* oref = &res.o[res.row(ds, li, kRef, h) * cfg.d];
          for (int j = 0; j < cfg.d; ++j) {
            const double e = o[j] - oref[j];
            num += e * e;
            den += oref[j] * oref[j];
            max_abs = std::max(max_abs, std::fabs(e));
          }
          max_lse = std::max(max_lse, std::fabs(res.lse[res.row(ds, li, var, h)] - res.lse[res.row(ds, li, kRef, h)]));
          pmax += res.ref_pmax[res.ref_row(ds, li, h)];
          eff += res.ref_eff_keys[res.ref_row(ds, li, h)];
        }
        Record r;
        r.ds = ds;
        r.var = var;
        r.len = cfg.lengths[li];
        r.rel_l2 = std::sqrt(num / den);
        r.max_abs = max_abs;
        r.max_lse = max_lse;
        r.o_ref_rms = std::sqrt(den / (double(cfg.hq) * cfg.d));
        r.ref_pmax = pmax / cfg.hq;
        r.ref_eff_keys = eff / cfg.hq;
        r.bytes_per_token_head = variant_bytes(var, cfg.d);
        recs.push_back(r);
      }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string date = today_utc();

  std::printf("splitkv_quant_accuracy: D=%d Hq=%d Hkv=%d, 1 sequence, q_len 1, non-causal, seed %llu (%.1f s)\n",
              cfg.d, cfg.hq, cfg.hkv, (unsigned long long)cfg.seed, seconds);
  std::printf("error of fp64 attention over the dequantized cache vs fp64 attention over the original values\n\n");
  std::printf("%-11s %-5s %7s %11s %11s %11s %11s %9s %9s\n", "dataset", "fmt", "L", "rel-L2(O)", "max|dO|",
              "max|dLSE|", "O_ref rms", "p_max", "eff.keys");
  for (const Record& r : recs)
    std::printf("%-11s %-5s %7d %11.3e %11.3e %11.3e %11.3e %9.3g %9.1f\n", dataset_name(r.ds), variant_name(r.var),
                r.len, r.rel_l2, r.max_abs, r.max_lse, r.o_ref_rms, r.ref_pmax, r.ref_eff_keys);
  std::printf("\nfp8 per-KV-head scales (mean over heads), K / V:\n");
  for (int ds = 0; ds < kNumDatasets; ++ds)
    for (int li = 0; li < nl; ++li) {
      double sk = 0, sv = 0;
      for (int h = 0; h < cfg.hkv; ++h) {
        sk += res.fp8_scale_k[(size_t(ds) * nl + li) * cfg.hkv + h];
        sv += res.fp8_scale_v[(size_t(ds) * nl + li) * cfg.hkv + h];
      }
      std::printf("  %-11s L=%-7d %.4e / %.4e\n", dataset_name(ds), cfg.lengths[li], sk / cfg.hkv, sv / cfg.hkv);
    }
  if (cfg.d == 128) {
    const Record* i8 = find(recs, kGaussian, kInt8, 32768);
    const Record* f8 = find(recs, kGaussian, kFp8, 32768);
    if (i8 && f8)
      std::printf("\ntargets (D=128, 32k, gaussian): int8 rel-L2 %.3e <= 1e-2: %s; fp8 rel-L2 %.3e <= 4e-2: %s\n",
                  i8->rel_l2, i8->rel_l2 <= 1e-2 ? "met" : "NOT met", f8->rel_l2, f8->rel_l2 <= 4e-2 ? "met" : "NOT met");
  }
  if (!cfg.json_path.empty()) write_json(cfg, recs, date);
  if (!cfg.md_path.empty()) write_md(cfg, recs, date, seconds);
  return 0;
}
