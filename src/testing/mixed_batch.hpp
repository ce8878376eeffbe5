// Random mixed serving steps for the work-list tests (kernels/common/mixed_work.hpp): the host list
// (tests/cpu/test_mixed_work.cpp) and the GPU builder (tests/gpu/test_mixed_work_gpu.cpp) draw the
// same mixes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/mixed_work.hpp"

namespace splitkv::testing {

// The tests' step shape: 32/8 heads' GQA group of 4 over 8 KV heads, decode rows of up to 8 packed
// rows with up to 16 splits of 4096 keys, prefill tiles of 128 rows.
inline detail::MixedShape mixed_test_shape(int max_seqs, int max_tokens, int max_kv_len) {
  detail::MixedShape s;
  s.max_seqs = max_seqs;
  s.max_tokens = max_tokens;
  s.max_kv_len = max_kv_len;
  s.num_kv_heads = 8;
  s.group = 4;
  s.decode_max_rows = 8;
  s.prefill_rows = 128;
  s.split_keys = 4096;
  s.max_splits = 16;
  s.block_keys = 64;
  return s;
}

// A step's lengths as the device holds them: cu_q [batch + 1], lens [batch].
struct MixedBatch {
  std::vector<int32_t> cu_q, lens;
  int size() const { return int(lens.size()); }
};

// A random mix within s's bounds: empty rows, decode rows (1-2 queries), speculative rows (up to
// 16), chunks of 1 to 3000 queries, prefixes from 0 to s.max_kv_len.
inline MixedBatch random_mixed_batch(std::mt19937& rng, const detail::MixedShape& s) {
  MixedBatch b;
  b.cu_q.push_back(0);
  const int n = 1 + int(rng() % s.max_seqs);
  for (int i = 0; i < n; ++i) {
    const int kind = int(rng() % 4);
    int q = kind == 0 ? 0 : kind == 1 ? 1 + int(rng() % 2) : kind == 2 ? 1 + int(rng() % 16) : 1 + int(rng() % 3000);
    q = std::min(q, s.max_tokens - b.cu_q.back());
    const int prefix = int(rng() % 4) == 0 ? 0 : int(rng() % (s.max_kv_len - q + 1));
    b.cu_q.push_back(b.cu_q.back() + q);
    b.lens.push_back(q + prefix);
  }
  return b;
}

}  // namespace splitkv::testing
