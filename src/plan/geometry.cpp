#include "plan/geometry.hpp"

#include <algorithm>
#include <cstdint>
#include <cmath>

namespace splitkv::plan {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace

DecodeGeometry decode_geometry(const DecodeProblem& p, int block_m) {
  DecodeGeometry g;
  g.group = p.num_q_heads / p.num_kv_heads;
  g.rows_per_kv = p.q_len * g.group;
  g.block_m = block_m;
  g.m_tiles = ceil_div(g.rows_per_kv, block_m);
  g.work_units = int64_t(p.batch) * p.num_kv_heads * g.m_tiles;
  g.out_rows = int64_t(p.batch) * p.q_len * p.num_q_heads;
  g.scale_log2 = resolved_softmax_scale(p.softmax_scale, p.head_dim) * kLog2e;
  g.num_kv_heads = p.num_kv_heads;
  g.batch = p.batch;
  return g;
}

PrefillGeometry prefill_geometry(const PrefillProblem& p, int block_m, int packed_queries) {
  PrefillGeometry g;
  g.group = p.num_q_heads / p.num_kv_heads;
  g.block_m = block_m;
  g.packed_queries = packed_queries;
  g.m_blocks = ceil_div(p.max_q_len, packed_queries > 0 ? packed_queries : block_m);
  g.grid_heads = packed_queries > 0 ? p.num_kv_heads : p.num_q_heads;
  g.work_units = int64_t(p.batch) * g.grid_heads * g.m_blocks;
  g.out_rows = int64_t(p.batch) * p.max_q_len * p.num_q_heads;
  g.scale_log2 = resolved_softmax_scale(p.softmax_scale, p.head_dim) * kLog2e;
  g.num_q_heads = p.num_q_heads;
  g.batch = p.batch;
  return g;
}

int decode_split_keys(const DecodeProblem& problem, int block_keys) {
  if (problem.window_left < 0) return problem.max_kv_len;
  const int64_t window = int64_t(problem.window_left) + problem.q_len + block_keys - 1;
  return int(std::min<int64_t>(problem.max_kv_len, window));
}

// The fields a decode problem and the chunked prefill over the same cache share, by name, in
// either direction (as_chunked_prefill, as_decode_rows).
namespace {
template <class From, class To>
void copy_shared_problem_fields(const From& f, To* t) {
  t->batch = f.batch;
  t->num_q_heads = f.num_q_heads;
  t->num_kv_heads = f.num_kv_heads;
  t->head_dim = f.head_dim;
  t->max_kv_len = f.max_kv_len;
  t->causal = f.causal;
  t->dtype = f.dtype;
  t->kv_format = f.kv_format;
  t->softmax_scale = f.softmax_scale;
  t->page_size = f.page_size;
  t->window_left = f.window_left;
  t->window_right = f.window_right;
  t->softcap = f.softcap;
  t->sinks = f.sinks;
}
}  // namespace

PrefillProblem as_chunked_prefill(const DecodeProblem& d) {
  PrefillProblem p;
  copy_shared_problem_fields(d, &p);
  p.max_q_len = d.q_len;
  p.kv_cache = true;
  return p;
}

DecodeProblem as_decode_rows(const PrefillProblem& p, int q_len) {
  DecodeProblem d;
  copy_shared_problem_fields(p, &d);
  d.q_len = q_len;
  return d;
}

}  // namespace splitkv::plan
