// The adversarial suite's generator: hostile decode calls of every class, each with the promise the
// API makes for it (docs/CONTRACTS.md), and the judge of what a run did with one. The host part
// (tests/cpu/test_adversarial.cpp, CI) runs them through validation and the CPU backend; the GPU
// part (tests/gpu/test_adversarial_gpu.cpp, under compute-sanitizer memcheck in
// scripts/gpu_check.sh) through the kernels, with guard bytes around every output.
//
// Classes: device lengths (negative, past max_kv_len, past the capacity, INT_MAX), page ids
// (negative, past the pool, INT_MIN; in and past the used pages), keys_after, host copies that
// disagree with the bound, broadcast (stride 0) and odd strides of every tensor argument, outputs
// whose elements overlap, option combinations, plans edited after planning, device descriptions,
// workspaces (missing, small, misaligned). Each comes from a random base case (format, page size,
// heads, queries, lengths, split options), so more seeds hunt further.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "splitkv/splitkv.hpp"
#include "testing/decode_case.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv::testing::hostile {

enum class Promise {
  kNamedError,        // planning or the call returns an error naming `argument`; nothing runs
  kNanIn,             // the call succeeds; O and LSE of `nan_sequences` are NaN, the rest match the reference
  kMatchesReference,  // the call succeeds and matches the fp64 reference over the same tensors
};

struct DecodeAttack {
  std::string name;  // class and what was broken, with the base case
  DecodeCaseSpec spec;
  PlanOptions options;
  DeviceInfo device = DeviceInfo::h200();
  // Layout edits of the case itself (refs, host data, lengths): the reference reads them too.
  std::function<void(DecodeCase&)> edit_case;
  // Edits of the plan after planning, and of the tensors handed to the call only.
  std::function<void(Plan&)> edit_plan;
  std::function<void(DecodeTensors&)> edit_tensors;
  // Workspace handed to the call: its size relative to plan.workspace_bytes, and an offset that
  // misaligns it.
  // >= 0: plan for this max_kv_len instead of the case's (a bound below the data).
  int plan_max_kv_len = -1;
  int64_t workspace_delta = 0;
  bool workspace_null = false;
  int workspace_offset = 0;
  bool hide_host_copies = false;  // lengths and page ids as device data only
  Promise promise = Promise::kMatchesReference;
  std::string argument;            // kNamedError
  // A valid input the GPU kernels refuse by name (a documented limit, e.g. no context shard over a
  // *_kc cache): the argument the GPU's error must name. The CPU backend serves it.
  std::string gpu_refuses;
  std::vector<int> nan_sequences;  // kNanIn
};

// The attacks of one seed (tens of calls, every class, over one random base case and its
// variants). Deterministic in the seed.
std::vector<DecodeAttack> decode_attacks(uint64_t seed);

// What a run must leave: `planned` (plan_decode's status), `ran` (the call's, when planned ok), and
// the case with the run's outputs in c.out / c.lse. Empty when the promise was kept, else why not.
std::string judge(const DecodeAttack& attack, const Status& planned, const Status& ran, DecodeCase& c);
// The same for a run on the GPU (attack.gpu_refuses: a named error there).
std::string judge_on_gpu(const DecodeAttack& attack, const Status& planned, const Status& ran, DecodeCase& c);

// The case's tensors as the attack hands them to the call (edit_case applied to c beforehand).
DecodeTensors attack_tensors(const DecodeAttack& attack, DecodeCase& c);

// The problem the attack plans (its spec's, with plan_max_kv_len applied).
DecodeProblem planned_problem(const DecodeAttack& attack);

// Builds the attack's case (make_decode_case, then edit_case) with NaN outputs.
DecodeCase attack_case(const DecodeAttack& attack);

// ---- prefill (varlen, with and without KV splits) ----------------------------------------------------

struct PrefillAttack {
  std::string name;
  PrefillCaseSpec spec;
  PlanOptions options;
  std::function<void(PrefillCase&)> edit_case;  // host data and layouts (the reference reads them too)
  std::function<void(PrefillTensors&)> edit_tensors;
  std::function<void(Plan&)> edit_plan;
  // Non-empty: the device copies of cu_seqlens_q / cu_seqlens_k hold these instead of the case's
  // (and the host copies are hidden): invalid device data the host cannot see.
  std::vector<int32_t> device_cu_seqlens_q, device_cu_seqlens_k;
  Promise promise = Promise::kMatchesReference;
  std::string argument;  // kNamedError
  // kNanIn: out's token rows [nan_begin, nan_end) are NaN in every head (the bad sequence's rows as
  // kernels/common/varlen_rows.hpp clamps them); the tokens of the other sequences match the reference.
  int64_t nan_begin = 0, nan_end = 0;
  std::vector<int> intact;
};

std::vector<PrefillAttack> prefill_attacks(uint64_t seed);
std::string judge(const PrefillAttack& attack, const Status& planned, const Status& ran, PrefillCase& c);
// Builds the attack's case (make_prefill_case, then edit_case) with NaN outputs.
PrefillCase attack_case(const PrefillAttack& attack);
// The case's tensors as the attack hands them to the call (host copies of device cu_seqlens hidden).
PrefillTensors attack_tensors(const PrefillAttack& attack, PrefillCase& c);

// ---- run_combine (partials the caller holds) ---------------------------------------------------------

// Partials [S, rows, H, D] / [S, rows, H] in fp32 and the merged out (bf16) / lse on the host.
struct CombineCase {
  CombineProblem problem;
  std::vector<float> partial_o, partial_lse, lse;
  std::vector<uint16_t> out;
  CombineTensors host_tensors();
};

struct CombineAttack {
  std::string name;
  CombineProblem problem;
  uint64_t seed = 1;
  std::function<void(CombineCase&)> edit_case;  // the partials' values (NaN, Inf, -inf LSEs)
  std::function<void(CombineTensors&)> edit_tensors;
  Promise promise = Promise::kMatchesReference;  // kMatchesReference: the fp64 merge of the same partials
  std::string argument;                          // kNamedError
};

std::vector<CombineAttack> combine_attacks(uint64_t seed);
CombineCase attack_case(const CombineAttack& attack);
// kMatchesReference: every row as the fp64 merge computes it (an empty partial has weight 0
// whatever its O holds; a NaN LSE makes its row NaN; a row of empty partials is O = 0, LSE = -inf).
std::string judge(const CombineAttack& attack, const Status& ran, const CombineCase& c);

}  // namespace splitkv::testing::hostile
