#include "testing/decode_case.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

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
  t.seq_lens = TensorRef::contiguous(seq_lens.data(), DType::kI32, {problem.batch});
  if (problem.page_size > 0) {
    t.block_table = TensorRef::contiguous(block_table.data(), DType::kI32, {problem.batch, max_pages});
    t.block_table_host = block_table.data();
  }
  t.lse = TensorRef::contiguous(lse.data(), DType::kF32, {problem.batch, problem.num_q_heads, problem.q_len});
  t.seq_lens_host = seq_lens.data();
  return t;
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

  // K and V: contiguous [B, capacity, Hkv(+pad), D] or paged [pages, page_size, Hkv(+pad), D].
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
  const int64_t token_stride = (Hkv + pad) * D;
  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype));
  c.k_ref = TensorRef::strided(nullptr, kv.k_element, {slabs, slab_tokens, Hkv, D},
                               {slab_tokens * token_stride, token_stride, D, 1});
  c.v_ref = c.k_ref;
  c.v_ref.dtype = kv.v_element;
  c.k = ElementBuffer(kv.k_element, size_t(slabs * slab_tokens * token_stride));
  c.v = ElementBuffer(kv.v_element, c.k.size());
  c.k.fill_normal(rng);
  c.v.fill_normal(rng);

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
        c.k.fill_nan(size_t((row * (Hkv + pad) + h) * D), size_t(D));
        c.v.fill_nan(size_t((row * (Hkv + pad) + h) * D), size_t(D));
      }
    }
    for (int64_t row = 0; row < B * Lq && pad; ++row) {
      std::fill_n(&c.q[size_t((row * (Hq + pad) + Hq) * D)], D, nan_bits(p.dtype));
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

}  // namespace splitkv::testing
