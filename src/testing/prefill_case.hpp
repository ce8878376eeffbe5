// Random prefill problems with their host data (padded or varlen), and their reference check.
#pragma once

#include <cstdint>
#include <vector>

#include "splitkv/problem.hpp"
#include "testing/compare.hpp"
#include "testing/element_buffer.hpp"

namespace splitkv::testing {

struct PrefillCaseSpec {
  PrefillProblem problem;
  // Varlen only: per-sequence lengths (each <= the problem's max_q_len / max_kv_len).
  std::vector<int> q_lens, kv_lens;
  uint64_t seed = 1;
  float q_scale = 1.f;
  bool strided = false;        // pad the head dimension (rows not contiguous)
  bool poison_unused = true;   // NaN in padding and in tokens no sequence owns (varlen)
};

struct PrefillCase {
  PrefillProblem problem;
  std::vector<uint16_t> q, out;
  ElementBuffer k, v;  // in the problem's KV format
  std::vector<float> lse;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
  std::vector<float> sinks;  // problem.sinks: a logit per query head (random in [-3, 8])
  TensorRef q_ref, k_ref, v_ref, out_ref, lse_ref;

  PrefillTensors host_tensors();
};

// A padded problem (token tensors [B, L, H, D]) and a varlen one (its sequences' lengths; max_q_len
// and max_kv_len their largest), K/V in the Q/O dtype.
PrefillCaseSpec padded_prefill_spec(int batch, int hq, int hkv, int lq, int lk, bool causal, int head_dim = 128,
                                    DType dtype = DType::kBF16);
PrefillCaseSpec varlen_prefill_spec(int hq, int hkv, std::vector<int> q_lens, std::vector<int> kv_lens, bool causal,
                                    int head_dim = 128, DType dtype = DType::kBF16);

PrefillCase make_prefill_case(const PrefillCaseSpec& spec);
void poison_outputs(PrefillCase& c);

// Compares c.out / c.lse with the fp64 reference over the tokens sequences own.
Comparison check_prefill(PrefillCase& c);

}  // namespace splitkv::testing
