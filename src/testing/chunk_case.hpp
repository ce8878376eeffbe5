// Chunked prefill over a KV cache (PrefillProblem::kv_cache) with its host data: a decode cache
// (NaN in every unused slot and page, shuffled block table) and chunks of random queries (varlen or
// padded). Used by the CPU tests of the reference, the GPU tests of the kernels and `splitkv verify`.
#pragma once

#include <cstdint>
#include <vector>

#include "splitkv/problem.hpp"
#include "testing/compare.hpp"
#include "testing/decode_case.hpp"

namespace splitkv::testing {

struct ChunkCaseSpec {
  DecodeProblem cache;        // batch, heads, head dim, dtype, kv_format, page_size, max_kv_len
  std::vector<int> seq_lens;  // cached tokens per sequence: its prefix and its chunk
  std::vector<int> chunks;    // queries per sequence
  bool causal = true;
  // false: padded queries, every chunk the same length ([batch, chunk, Hq, D], LSE [batch, Hq, chunk]).
  bool varlen = true;
  bool head_major_kv = false;  // the cache stored [slabs, Hkv, tokens, D] (DecodeCaseSpec::head_major_kv)
  uint64_t seed = 7;
};

struct ChunkCase {
  DecodeCase cache;
  std::vector<int32_t> cu_q;
  std::vector<uint16_t> q, out;  // [total_q, Hq, D] (padded: the same memory as [batch, chunk, Hq, D])
  std::vector<float> lse;        // [Hq, total_q] (padded: [batch, Hq, chunk])
  PrefillProblem problem;
  PrefillTensors tensors;        // over the host memory above (with the host copies of lengths and pages)
};

ChunkCase make_chunk_case(const ChunkCaseSpec& spec);

// Fills out and lse with NaN.
void poison_outputs(ChunkCase& c);

// Compares c.out / c.lse with ref::prefill by the rules of docs/BENCHMARKING.md.
Comparison check_chunk(ChunkCase& c);

}  // namespace splitkv::testing
