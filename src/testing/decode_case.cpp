#include "testing/decode_case.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "quant/kv_quant_host.hpp"
#include "quant/kv_rows.hpp"
#include "testing/random_fill.hpp"

namespace splitkv::testing {

DecodeTensors DecodeCase::host_tensors() {
  DecodeTensors t;
  t.q = q_ref;
  t.q.data = q.data();
  t.k = k_ref;
  t.k.data = k.data();
  t.v = v_ref;
  t.v.data = v.data();
  t.out = out_ref;
  t.out.data = out.data();
  if (k_scales.size() > 0) {
    t.k_scales = k_scales_ref;
    t.k_scales.data = k_scales.data();
    t.v_scales = v_scales_ref;
    t.v_scales.data = v_scales.data();
  }
  if (k_tail.size() > 0) {
    t.k_tail = k_tail_ref;
    t.k_tail.data = k_tail.data();
  }
  t.seq_lens = TensorRef::contiguous(seq_lens.data(), DType::kI32, {problem.batch});
  if (problem.page_size > 0) {
    t.block_table = TensorRef::contiguous(block_table.data(), DType::kI32, {problem.batch, max_pages});
    t.block_table_host = block_table.data();
  }
  t.lse = TensorRef::contiguous(lse.data(), DType::kF32, {problem.batch, problem.num_q_heads, problem.q_len});
  t.seq_lens_host = seq_lens.data();
  if (problem.sinks) t.sinks = TensorRef::contiguous(sinks.data(), DType::kF32, {problem.num_q_heads});
  if (problem.tree_mask) {
    const int64_t row_bytes = (problem.q_len + 7) / 8;
    t.tree_mask = TensorRef::contiguous(tree_mask.data(), DType::kI8, {problem.batch, problem.q_len, row_bytes});
  }
  return t;
}

namespace {

// One side (K or V) of a case's cache in its format's storage: rows of standard normal values,
// stored as 16-bit values or quantized by the host quantizer (docs/KV_FORMATS.md).
struct CacheSide {
  ElementBuffer& data;
  ElementBuffer& scales;
  const TensorRef& scales_ref;
  detail::KvScales kind;
  int head_dim;
  int num_kv_heads;

  // Per-head FP8 scales chosen so standard normal values stay inside e4m3's range.
  static float fp8_scale(int64_t head) { return (1.f + 0.25f * float(head)) / 80.f; }

  void write(int64_t first_element, int64_t slab, int64_t slot, int64_t head, std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(head_dim));
    for (float& value : x) value = normal(rng);
    uint8_t* codes = data.byte_of(size_t(first_element));
    switch (kind) {
      case detail::KvScales::kNone:
        for (int j = 0; j < head_dim; ++j) {
          const uint16_t bits = detail::float_to_half_bits(x[size_t(j)], data.dtype());
          std::memcpy(codes + 2 * j, &bits, 2);
        }
        return;
      case detail::KvScales::kPerHead:
        if (head < num_kv_heads) return quant::quantize_row_fp8(x.data(), head_dim, fp8_scale(head), codes);
        return;
      case detail::KvScales::kPerTokenPair: {
        const int bits = detail::element_traits(data.dtype()).bits;
        const quant::RowScale s = quant::quantize_row_int(x.data(), head_dim, bits, codes);
        if (head < num_kv_heads) store_pair(slab, slot, head, s.scale_fp16, s.min_fp16);
        return;
      }
    }
  }

  // A row that must never reach an output: NaN values, NaN FP8 codes, or a NaN (scale, min).
  void poison(int64_t first_element, int64_t slab, int64_t slot, int64_t head) {
    switch (kind) {
      case detail::KvScales::kNone: return data.fill_nan(size_t(first_element), size_t(head_dim));
      case detail::KvScales::kPerHead:
        std::memset(data.byte_of(size_t(first_element)), quant::kE4M3NaN, size_t(head_dim));
        return;
      case detail::KvScales::kPerTokenPair:
        if (head < num_kv_heads) store_pair(slab, slot, head, quant::kFp16NaN, quant::kFp16NaN);
        return;
    }
  }

  void store_pair(int64_t slab, int64_t slot, int64_t head, uint16_t scale, uint16_t min) {
    uint16_t* pairs = static_cast<uint16_t*>(scales.data());
    const int64_t at = slab * scales_ref.stride[0] + head * scales_ref.stride[1] + slot * scales_ref.stride[2];
    pairs[at] = scale;
    pairs[at + 1] = min;
  }
};

}  // namespace

TensorRef kv_cache_ref(void* data, DType dtype, int64_t slabs, int64_t slab_tokens, int64_t heads, int64_t head_slots,
                       int64_t head_dim, bool head_major) {
  const int64_t D = head_dim;
  return TensorRef::strided(data, dtype, {slabs, slab_tokens, heads, D},
                            {slab_tokens * head_slots * D, head_major ? D : head_slots * D,
                             head_major ? slab_tokens * D : D, 1});
}

DecodeCase make_decode_case(const DecodeCaseSpec& spec) {
  DecodeCase c;
  const DecodeProblem& p = spec.problem;
  c.problem = p;
  std::mt19937_64 rng(spec.seed);
  const int64_t B = p.batch, Lq = p.q_len, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  const int64_t pad = spec.strided ? 1 : 0;  // one unused head slot per token row
  c.seq_lens = spec.seq_lens.empty() ? std::vector<int32_t>(B, p.max_kv_len)
                                     : std::vector<int32_t>(spec.seq_lens.begin(), spec.seq_lens.end());

  // Q and O: [B, Lq, Hq(+pad), D]
  c.q_ref = TensorRef::strided(nullptr, p.dtype, {B, Lq, Hq, D}, {Lq * (Hq + pad) * D, (Hq + pad) * D, D, 1});
  c.out_ref = c.q_ref;
  c.q.resize(size_t(B * Lq * (Hq + pad) * D));
  fill_normal(c.q, p.dtype, rng, spec.q_scale);
  c.out.resize(c.q.size());
  c.lse.resize(size_t(B * Hq * Lq));

  // K and V: contiguous [B, capacity, Hkv(+pad), D] or paged [pages, page_size, Hkv(+pad), D]; head-major,
  // the memory is [B or pages, Hkv(+pad), tokens, D] and the strides say so.
  int64_t slabs, slab_tokens;  // sequences/pages and the tokens each holds
  if (p.page_size == 0) {
    slabs = B;
    slab_tokens = std::max<int64_t>(1, p.max_kv_len + spec.extra_capacity);
  } else {
    c.max_pages = std::max<int64_t>(1, (p.max_kv_len + p.page_size - 1) / p.page_size);
    slabs = B * c.max_pages + spec.extra_pages;
    slab_tokens = p.page_size;
    std::vector<int32_t> ids(static_cast<size_t>(slabs));
    std::iota(ids.begin(), ids.end(), 0);
    if (spec.shuffle_pages) std::shuffle(ids.begin(), ids.end(), rng);
    c.block_table.assign(ids.begin(), ids.begin() + B * c.max_pages);
  }
  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype));
  c.k_ref = kv_cache_ref(nullptr, kv.k_element, slabs, slab_tokens, Hkv, Hkv + pad, D, spec.head_major_kv);
  c.v_ref = c.k_ref;
  c.v_ref.dtype = kv.v_element;
  c.k = ElementBuffer(kv.k_element, size_t(slabs * c.k_ref.stride[0]));
  c.v = ElementBuffer(kv.v_element, c.k.size());
  // First element of (cache row, head): rows are slab * slab_tokens + slot, heads include the pad.
  const std::array<int64_t, TensorRef::kMaxRank>& st = c.k_ref.stride;
  auto first_element = [&](int64_t row, int64_t h) {
    return row / slab_tokens * st[0] + row % slab_tokens * st[1] + h * st[2];
  };
  if (kv.scales == detail::KvScales::kPerHead) {
    c.k_scales = ElementBuffer(DType::kF32, size_t(Hkv));
    c.k_scales_ref = TensorRef::contiguous(nullptr, DType::kF32, {Hkv});
    for (int64_t h = 0; h < Hkv; ++h) static_cast<float*>(c.k_scales.data())[h] = CacheSide::fp8_scale(h);
  } else if (kv.scales == detail::KvScales::kPerTokenPair) {
    c.k_scales = ElementBuffer(DType::kF16, size_t(slabs * Hkv * slab_tokens * 2));
    c.k_scales_ref = TensorRef::contiguous(nullptr, DType::kF16, {slabs, Hkv, slab_tokens, 2});
  }
  c.v_scales = c.k_scales;
  c.v_scales_ref = c.k_scales_ref;
  // *_kc: keys per channel over groups of 64 positions plus a 16-bit tail per sequence, written below
  // by the host definition's append (scales and tail NaN where nothing is appended).
  const bool channel_keys = kv.channel_keys;
  const int64_t groups = (slab_tokens + quant::kKeyGroup - 1) / quant::kKeyGroup;
  if (channel_keys) {
    c.k_scales = ElementBuffer(DType::kF16, size_t(slabs * Hkv * groups * 2 * D));
    c.k_scales.fill_nan(0, c.k_scales.size());
    c.k_scales_ref = TensorRef::contiguous(nullptr, DType::kF16, {slabs, Hkv, groups, 2 * D});
    c.k_tail = ElementBuffer(p.dtype, size_t(B * Hkv * quant::kKeyTailRows * D));
    c.k_tail.fill_nan(0, c.k_tail.size());
    c.k_tail_ref = TensorRef::contiguous(nullptr, p.dtype, {B, Hkv, quant::kKeyTailRows, D});
  }
  CacheSide k_side{c.k, c.k_scales, c.k_scales_ref, kv.scales, int(D), int(Hkv)};
  CacheSide v_side{c.v, c.v_scales, c.v_scales_ref, kv.scales, int(D), int(Hkv)};
  // Rows in chunks of 256 on all threads (a long case spends most of its GPU test's time here
  // otherwise). Rows never share a byte (D is even for INT4), so chunks write apart.
  for_each_random_chunk(slabs * slab_tokens, 256, rng, [&](int64_t first_row, int64_t last_row, std::mt19937_64& g) {
    for (int64_t row = first_row; row < last_row; ++row) {
      for (int64_t h = 0; h < Hkv + pad; ++h) {
        const int64_t first = first_element(row, h);
        if (!channel_keys) k_side.write(first, row / slab_tokens, row % slab_tokens, h, g);
        v_side.write(first, row / slab_tokens, row % slab_tokens, h, g);
      }
    }
  });
  if (channel_keys) {  // every sequence's keys appended in one call, its tokens in position order
    std::vector<float> keys;
    std::vector<quant::KcAppendToken> tokens;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t pos = 0; pos < c.seq_lens[size_t(b)]; ++pos) tokens.push_back({});
    }
    keys.resize(tokens.size() * size_t(Hkv * D));
    std::normal_distribution<float> normal(0.f, 1.f);
    for (float& x : keys) x = detail::round_to(normal(rng), p.dtype);
    size_t n = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t pos = 0; pos < c.seq_lens[size_t(b)]; ++pos, ++n) {
        const int64_t block = p.page_size > 0 ? c.block_table[size_t(b * c.max_pages + pos / slab_tokens)] : b;
        tokens[n] = {block * slab_tokens + pos % slab_tokens, pos, b, &keys[n * size_t(Hkv * D)]};
      }
    }
    TensorRef codes = c.k_ref, scales = c.k_scales_ref, tail = c.k_tail_ref;
    codes.data = c.k.data();
    scales.data = c.k_scales.data();
    tail.data = c.k_tail.data();
    quant::append_keys(quant::kc_key_view(codes, scales, tail), tokens);
  }

  if (spec.poison_unused) {
    // Everything no valid key uses becomes NaN: padding, slots past each length, unused pages.
    std::vector<char> used(size_t(slabs * slab_tokens), 0);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < std::min<int64_t>(c.seq_lens[b], p.max_kv_len); ++t) {
        const int64_t slab = p.page_size == 0 ? b : c.block_table[b * c.max_pages + t / p.page_size];
        const int64_t slot = p.page_size == 0 ? t : t % p.page_size;
        used[size_t(slab * slab_tokens + slot)] = 1;
      }
    }
    for (int64_t row = 0; row < slabs * slab_tokens; ++row) {
      for (int64_t h = 0; h < Hkv + pad; ++h) {
        if (used[size_t(row)] && h < Hkv) continue;
        const int64_t first = first_element(row, h);
        if (!channel_keys) k_side.poison(first, row / slab_tokens, row % slab_tokens, h);
        v_side.poison(first, row / slab_tokens, row % slab_tokens, h);
      }
    }
    for (int64_t row = 0; row < B * Lq && pad; ++row) {
      std::fill_n(&c.q[size_t((row * (Hq + pad) + Hq) * D)], D, nan_bits(p.dtype));
    }
  }
  // Variants' tensors, from their own stream so every other value is that of the plain case.
  std::mt19937_64 variant_rng(spec.seed ^ 0x9e3779b97f4a7c15ull);
  if (p.sinks) {
    std::uniform_real_distribution<float> logit(-3.f, 8.f);
    c.sinks.resize(size_t(Hq));
    for (float& s : c.sinks) s = logit(variant_rng);
  }
  if (p.tree_mask) {  // a random tree per sequence: draft i hangs under a random earlier draft or the prefix
    const int64_t row_bytes = (Lq + 7) / 8;
    c.tree_mask.assign(size_t(B * Lq * row_bytes), 0);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int> parent(size_t(Lq), -1);
      for (int64_t i = 0; i < Lq; ++i) {
        parent[size_t(i)] = int(std::uniform_int_distribution<int64_t>(-1, i - 1)(variant_rng));
        uint8_t* row = &c.tree_mask[size_t((b * Lq + i) * row_bytes)];
        for (int j = int(i); j >= 0; j = parent[size_t(j)]) row[j / 8] = uint8_t(row[j / 8] | (1u << (j % 8)));
      }
    }
  }
  poison_outputs(c);
  return c;
}

void poison_outputs(DecodeCase& c) {
  std::fill(c.out.begin(), c.out.end(), nan_bits(c.problem.dtype));
  std::fill(c.lse.begin(), c.lse.end(), std::numeric_limits<float>::quiet_NaN());
}

void copy_sequence(const DecodeCase& from, int from_b, DecodeCase& to, int to_b) {
  const DecodeProblem& p = from.problem;
  const int64_t len = from.seq_lens[from_b];
  to.seq_lens[to_b] = static_cast<int32_t>(len);
  // Calls copy(src_offset, dst_offset, count) for each (row, head) of sequence sb -> db.
  auto for_rows = [](const TensorRef& sref, int64_t sb, const TensorRef& dref, int64_t db, int64_t rows,
                     int64_t heads, int64_t d, auto&& copy) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        copy(size_t(sb * sref.stride[0] + r * sref.stride[1] + h * sref.stride[2]),
             size_t(db * dref.stride[0] + r * dref.stride[1] + h * dref.stride[2]), size_t(d));
  };
  for_rows(from.q_ref, from_b, to.q_ref, to_b, p.q_len, p.num_q_heads, p.head_dim,
           [&](size_t s, size_t d, size_t n) { std::copy_n(&from.q[s], n, &to.q[d]); });
  for_rows(from.k_ref, from_b, to.k_ref, to_b, len, p.num_kv_heads, p.head_dim, [&](size_t s, size_t d, size_t n) {
    to.k.copy_from(d, from.k, s, n);
    to.v.copy_from(d, from.v, s, n);
  });
  if (from.k_scales_ref.rank == 4) {  // per-token (scale, min) pairs [B, Hkv, capacity, 2]
    // rows of `width` elements: per-token pairs (2) or, for *_kc keys, group rows (2 D) per 64 keys.
    auto copy_rows = [&](const TensorRef& sref, const ElementBuffer& src, const TensorRef& dref, ElementBuffer& dst,
                         int64_t rows, int64_t width) {
      for (int64_t h = 0; h < p.num_kv_heads; ++h)
        for (int64_t r = 0; r < rows; ++r)
          dst.copy_from(size_t(to_b * dref.stride[0] + h * dref.stride[1] + r * dref.stride[2]), src,
                        size_t(from_b * sref.stride[0] + h * sref.stride[1] + r * sref.stride[2]), size_t(width));
    };
    const bool channel_keys = from.k_tail_ref.rank == 4;
    if (channel_keys) {
      copy_rows(from.k_scales_ref, from.k_scales, to.k_scales_ref, to.k_scales, (len + 63) / 64, 2 * p.head_dim);
      // The sequence's tail ring (row b of k_tail): [Hkv, 128, D].
      const TensorRef& st = from.k_tail_ref;
      const TensorRef& dt = to.k_tail_ref;
      for (int64_t h = 0; h < p.num_kv_heads; ++h)
        for (int64_t r = 0; r < st.shape[2]; ++r)
          to.k_tail.copy_from(size_t(to_b * dt.stride[0] + h * dt.stride[1] + r * dt.stride[2]), from.k_tail,
                              size_t(from_b * st.stride[0] + h * st.stride[1] + r * st.stride[2]), size_t(p.head_dim));
    } else {
      copy_rows(from.k_scales_ref, from.k_scales, to.k_scales_ref, to.k_scales, len, 2);
    }
    copy_rows(from.v_scales_ref, from.v_scales, to.v_scales_ref, to.v_scales, len, 2);
  }
}

std::vector<uint16_t> sequence_output_bits(const DecodeCase& c, int b) {
  std::vector<uint16_t> bits;
  const DecodeProblem& p = c.problem;
  for (int i = 0; i < p.q_len; ++i)
    for (int h = 0; h < p.num_q_heads; ++h)
      for (int j = 0; j < p.head_dim; ++j)
        bits.push_back(c.out[size_t(b * c.out_ref.stride[0] + i * c.out_ref.stride[1] + h * c.out_ref.stride[2] + j)]);
  return bits;
}

DecodeCaseSpec paged_gqa_spec(int q_len, std::vector<int> lens) {
  DecodeCaseSpec s;
  s.problem.batch = static_cast<int>(lens.size());
  s.problem.num_q_heads = 32;
  s.problem.num_kv_heads = 8;
  s.problem.head_dim = 128;
  s.problem.q_len = q_len;
  s.problem.causal = q_len > 1;
  s.problem.page_size = 16;
  s.problem.max_kv_len = *std::max_element(lens.begin(), lens.end());
  s.seq_lens = std::move(lens);
  return s;
}

DecodeShard paged_shard(const DecodeCase& c, const std::vector<int>& lo, const std::vector<int>& hi) {
  const int B = c.problem.batch, P = c.problem.page_size;
  DecodeShard s;
  s.lens.resize(size_t(B));
  s.keys_after.resize(size_t(B));
  s.block_table.assign(c.block_table.size(), 0);
  for (int b = 0; b < B; ++b) {
    s.lens[size_t(b)] = hi[size_t(b)] - lo[size_t(b)];
    s.keys_after[size_t(b)] = c.seq_lens[size_t(b)] - hi[size_t(b)];
    const int64_t first = lo[size_t(b)] / P;
    for (int64_t j = 0; first + j < c.max_pages; ++j) {
      s.block_table[size_t(b * c.max_pages + j)] = c.block_table[size_t(b * c.max_pages + first + j)];
    }
  }
  return s;
}

}  // namespace splitkv::testing
