#include "testing/chunk_case.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>

#include "api/chunked_tensors.hpp"
#include "plan/geometry.hpp"
#include "testing/random_fill.hpp"

namespace splitkv::testing {

ChunkCase make_chunk_case(const ChunkCaseSpec& spec) {
  DecodeCaseSpec cache_spec;
  cache_spec.problem = spec.cache;
  cache_spec.problem.q_len = 1;  // the cache's decode queries are not used
  cache_spec.seq_lens = spec.seq_lens;
  cache_spec.seed = spec.seed;
  cache_spec.head_major_kv = spec.head_major_kv;
  ChunkCase c;
  c.cache = make_decode_case(cache_spec);
  c.cu_q = {0};
  for (int n : spec.chunks) c.cu_q.push_back(c.cu_q.back() + n);
  const DecodeProblem& d = c.cache.problem;
  const int64_t total_q = c.cu_q.back(), Hq = d.num_q_heads, D = d.head_dim;
  std::mt19937_64 rng(spec.seed * 7919 + 1);
  c.q.resize(size_t(total_q) * Hq * D);
  fill_normal(c.q, d.dtype, rng);
  c.out.assign(c.q.size(), nan_bits(d.dtype));
  c.lse.assign(size_t(Hq) * total_q, std::numeric_limits<float>::quiet_NaN());

  const int longest = spec.chunks.empty() ? 1 : *std::max_element(spec.chunks.begin(), spec.chunks.end());
  c.problem = plan::as_chunked_prefill(d);  // the cache's heads, dims, format and pages
  c.problem.max_q_len = std::max(1, longest);
  c.problem.varlen = spec.varlen;
  c.problem.causal = spec.causal;
  PrefillTensors& t = c.tensors;
  if (spec.varlen) {
    t.q = TensorRef::contiguous(c.q.data(), d.dtype, {total_q, Hq, D});
    t.out = TensorRef::contiguous(c.out.data(), d.dtype, {total_q, Hq, D});
    t.lse = TensorRef::contiguous(c.lse.data(), DType::kF32, {Hq, total_q});
    t.cu_seqlens_q = TensorRef::contiguous(c.cu_q.data(), DType::kI32, {d.batch + 1});
    t.cu_seqlens_q_host = c.cu_q.data();
  } else {
    if (total_q != int64_t(d.batch) * longest) throw std::invalid_argument("padded chunks differ in length");
    const int64_t B = d.batch, Lq = longest;
    t.q = TensorRef::contiguous(c.q.data(), d.dtype, {B, Lq, Hq, D});
    t.out = TensorRef::contiguous(c.out.data(), d.dtype, {B, Lq, Hq, D});
    t.lse = TensorRef::contiguous(c.lse.data(), DType::kF32, {B, Hq, Lq});
  }
  detail::bind_decode_cache(c.cache.host_tensors(), &t);
  return c;
}

void poison_outputs(ChunkCase& c) {
  std::fill(c.out.begin(), c.out.end(), nan_bits(c.problem.dtype));
  std::fill(c.lse.begin(), c.lse.end(), std::numeric_limits<float>::quiet_NaN());
}

Comparison check_chunk(ChunkCase& c) {
  const ref::Result exact = ref::prefill(c.problem, c.tensors);
  const ref::Result low = ref::prefill(c.problem, c.tensors, ref::Options{ref::Method::kLowPrecision});
  return compare_with_reference(exact, low, dense_values(c.tensors.out), dense_values(c.tensors.lse));
}

}  // namespace splitkv::testing
