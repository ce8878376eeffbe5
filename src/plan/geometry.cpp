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

PrefillProblem as_chunked_prefill(const DecodeProblem& d) {
  PrefillProblem p;
  p.batch = d.batch;
  p.num_q_heads = d.num_q_heads;
  p.num_kv_heads = d.num_kv_heads;
  p.head_dim = d.head_dim;
  p.max_q_len = d.q_len;
  p.max_kv_len = d.max_kv_len;
  p.causal = d.causal;
  p.dtype = d.dtype;
  p.kv_format = d.kv_format;
  p.softmax_scale = d.softmax_scale;
  p.kv_cache = true;
  p.page_size = d.page_size;
  p.window_left = d.window_left;
  p.window_right = d.window_right;
  p.softcap = d.softcap;
  p.sinks = d.sinks;
  return p;
}

DecodeProblem as_decode_rows(const PrefillProblem& p, int q_len) {
  DecodeProblem d;
  d.batch = p.batch;
  d.num_q_heads = p.num_q_heads;
  d.num_kv_heads = p.num_kv_heads;
  d.head_dim = p.head_dim;
  d.q_len = q_len;
  d.max_kv_len = p.max_kv_len;
  d.causal = p.causal;
  d.dtype = p.dtype;
  d.kv_format = p.kv_format;
  d.softmax_scale = p.softmax_scale;
  d.page_size = p.page_size;
  d.window_left = p.window_left;
  d.window_right = p.window_right;
  d.softcap = p.softcap;
  d.sinks = p.sinks;
  return d;
}

}  // namespace splitkv::plan
