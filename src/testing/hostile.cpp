#include "testing/hostile.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <utility>

#include "reference/reference.hpp"
#include "testing/compare.hpp"
#include "common/half_convert.hpp"
#include "kernels/common/attention_variants.hpp"
#include "kernels/common/lse_combine.hpp"
#include "kernels/common/varlen_rows.hpp"
#include "testing/decode_check.hpp"

namespace splitkv::testing::hostile {
namespace {

// One random base case: the shape every attack of the seed starts from.
struct Base {
  DecodeCaseSpec spec;
  PlanOptions options;
  std::string name;
};

Base random_base(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
  auto pick = [&](int n) { return int(rng() % uint64_t(n)); };
  // The *_kc formats run on the CPU backend only so far (the GPU suite skips them as uncompiled).
  const KvFormat formats[] = {KvFormat::kNative, KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4,
                              KvFormat::kK8V4,   KvFormat::kInt8Kc,  KvFormat::kInt4Kc, KvFormat::kK8V4Kc};
  const int pages[] = {0, 16, 32, 64};
  const int heads[][2] = {{8, 2}, {32, 8}, {28, 4}, {4, 4}, {8, 1}};
  const int q_lens[] = {1, 1, 2, 4, 8};
  Base b;
  auto plans = [&b](const PlanOptions& options) {
    Plan plan;
    return plan_decode(b.spec.problem, DeviceInfo::h200(), options, &plan).ok();
  };
  const int batch = 2 + pick(3);
  const int* h = heads[pick(5)];
  const int max_len = 1 + pick(2500);
  const KvFormat format = formats[pick(8)];
  int page_size = pages[pick(4)];
  if (detail::kv_format_traits(format).channel_keys && page_size % detail::kKeyGroup != 0) page_size = detail::kKeyGroup;  // whole key groups
  b.spec = DecodeSpecBuilder(batch, h[0], h[1], max_len)
               .format(format)
               .paged(page_size)
               .queries(q_lens[pick(5)], pick(2) == 1)
               .spec;
  b.spec.seed = seed;
  b.spec.seq_lens.resize(size_t(batch));
  for (int& len : b.spec.seq_lens) len = pick(max_len + 1);
  b.spec.seq_lens[size_t(pick(batch))] = max_len;
  switch (pick(6)) {
    case 0: break;
    case 1: b.options.num_splits = 3; break;
    case 2: b.options.split_tokens = 1024; break;
    case 3:
      b.options.num_splits = 4;
      b.options.merge = Merge::kFused;
      break;
    default: {  // decode served by chunked prefill over the cache (Plan::decode_via_prefill), where it plans
      PlanOptions routed;
      routed.family = pick(2) == 0 ? "prefill_mma" : "prefill_sm90_gqa64";
      if (plans(routed)) b.options = routed;
    }
  }
  // Options the base's format refuses (a fused merge over a *_kc cache, which chunked prefill serves).
  if (!plans(b.options)) b.options = PlanOptions{};
  // The attention variants, from a stream of their own (a seed's shape stays what it was): a window
  // in a third of the bases, a softcap and sinks in a quarter each (sinks not with a fused merge,
  // which folds none, nor on the prefill route, which serves none in decode).
  std::mt19937_64 vrng(seed * 0xbf58476d1ce4e5b9ull + 7);
  auto vpick = [&](int n) { return int(vrng() % uint64_t(n)); };
  const int windows[] = {0, 1, 63, 100, 700};
  if (vpick(3) == 0) b.spec.problem.window_left = windows[vpick(5)];
  if (vpick(4) == 0) b.spec.problem.softcap = 30.f;
  if (vpick(4) == 0 && b.options.merge != Merge::kFused && b.options.family.empty()) b.spec.problem.sinks = true;
  if (!plans(b.options)) {  // options the variants refuse
    b.spec.problem.window_left = -1;
    b.spec.problem.softcap = 0.f;
    b.spec.problem.sinks = false;
  }
  const DecodeProblem& p = b.spec.problem;
  b.name = std::string(to_string(detail::resolve_kv_format(p.kv_format, p.dtype))) + " B=" + std::to_string(batch) +
           " " + std::to_string(p.num_q_heads) + "/" + std::to_string(p.num_kv_heads) + " q_len " +
           std::to_string(p.q_len) + (p.causal ? " causal" : "") + " max_kv_len " + std::to_string(max_len) +
           " page " + std::to_string(p.page_size) + " splits " + std::to_string(b.options.num_splits) +
           " split_tokens " + std::to_string(b.options.split_tokens) + (b.options.merge == Merge::kFused ? " fused" : "") +
           (b.options.family.empty() ? "" : " family " + b.options.family) +
           (p.window_left >= 0 ? " window " + std::to_string(p.window_left) : "") + (p.softcap > 0.f ? " softcap 30" : "") +
           (p.sinks ? " sinks" : "");
  return b;
}

// The keys a case's cache holds per sequence (contiguous: its capacity; paged: its pages).
int64_t capacity_of(const DecodeCase& c) {
  return c.problem.page_size == 0 ? c.k_ref.shape[1] : c.max_pages * c.problem.page_size;
}

// The dense values of the sequences not in `skip` (O [B, Lq, Hq, D] and LSE [B, Hq, Lq] rows).
void keep_sequences(const DecodeProblem& p, const std::vector<int>& skip, std::vector<double>* out,
                    std::vector<double>* lse) {
  const size_t per_out = size_t(p.q_len) * p.num_q_heads * p.head_dim, per_lse = size_t(p.num_q_heads) * p.q_len;
  std::vector<double> o, l;
  for (int b = 0; b < p.batch; ++b) {
    if (std::find(skip.begin(), skip.end(), b) != skip.end()) continue;
    o.insert(o.end(), out->begin() + b * per_out, out->begin() + (b + 1) * per_out);
    l.insert(l.end(), lse->begin() + b * per_lse, lse->begin() + (b + 1) * per_lse);
  }
  *out = std::move(o);
  *lse = std::move(l);
}

// kNamedError: planning or the call refused, naming `argument` ("" when the promise was kept).
std::string judge_named_error(const Status& planned, const Status& ran, const std::string& argument) {
  const Status& s = planned.ok() ? ran : planned;
  if (s.ok()) return "accepted; expected an error naming '" + argument + "'";
  if (s.argument() != argument) return "the error names '" + s.argument() + "', not '" + argument + "': " + s.message();
  if (s.message().find(argument) == std::string::npos) return "the message omits the argument: " + s.message();
  return "";
}

// The attack adders of the generators: `attack` copies the prototype (the base case and options),
// names it and appends it; `named` also sets the argument a kNamedError attack must see named.
template <class Attack>
struct AttackList {
  std::vector<Attack> attacks;
  Attack prototype;
  std::string tag;  // " [seed N: base]"
  Attack& attack(std::string what, Promise promise) {
    Attack a = prototype;
    a.name = what + tag;
    a.promise = promise;
    attacks.push_back(std::move(a));
    return attacks.back();
  }
  Attack& named(std::string what, std::string argument) {
    Attack& a = attack(std::move(what), Promise::kNamedError);
    a.argument = std::move(argument);
    return a;
  }
};

}  // namespace

DecodeProblem planned_problem(const DecodeAttack& attack) {
  DecodeProblem p = attack.spec.problem;
  if (attack.plan_max_kv_len >= 0) p.max_kv_len = attack.plan_max_kv_len;
  return p;
}

DecodeCase attack_case(const DecodeAttack& attack) {
  DecodeCase c = make_decode_case(attack.spec);
  if (attack.edit_case) attack.edit_case(c);
  poison_outputs(c);
  return c;
}

DecodeTensors attack_tensors(const DecodeAttack& attack, DecodeCase& c) {
  DecodeTensors t = c.host_tensors();
  if (attack.hide_host_copies) {
    t.seq_lens_host = nullptr;
    t.block_table_host = nullptr;
  }
  if (attack.edit_tensors) attack.edit_tensors(t);
  return t;
}

std::string judge_on_gpu(const DecodeAttack& a, const Status& planned, const Status& ran, DecodeCase& c) {
  if (!a.gpu_refuses.empty()) return judge_named_error(planned, ran, a.gpu_refuses);
  return judge(a, planned, ran, c);
}

std::string judge(const DecodeAttack& a, const Status& planned, const Status& ran, DecodeCase& c) {
  if (a.promise == Promise::kNamedError) return judge_named_error(planned, ran, a.argument);
  if (!planned.ok()) return "planning failed: " + planned.message();
  if (!ran.ok()) return "the call failed: " + ran.message();
  if (a.promise == Promise::kMatchesReference) {
    const Comparison cmp = check_decode(c);
    return cmp.passed ? "" : "does not match the reference: " + cmp.summary();
  }
  // kNanIn: the named sequences NaN, the others as the reference computes them from the same case
  // with those sequences made harmless (length 0, their pages valid).
  const DecodeTensors got = c.host_tensors();
  std::vector<double> out = dense_values(got.out), lse = dense_values(got.lse);
  const DecodeProblem& p = c.problem;
  const size_t per_out = size_t(p.q_len) * p.num_q_heads * p.head_dim, per_lse = size_t(p.num_q_heads) * p.q_len;
  for (int b : a.nan_sequences) {
    for (size_t i = b * per_out; i < (b + 1) * per_out; ++i) {
      if (!std::isnan(out[i])) return "sequence " + std::to_string(b) + ": O is not NaN at element " + std::to_string(i);
    }
    for (size_t i = b * per_lse; i < (b + 1) * per_lse; ++i) {
      if (!std::isnan(lse[i])) return "sequence " + std::to_string(b) + ": LSE is not NaN";
    }
  }
  DecodeCase safe = c;
  for (int b : a.nan_sequences) {
    safe.seq_lens[size_t(b)] = 0;
    for (int64_t j = 0; j < safe.max_pages; ++j) safe.block_table[size_t(b * safe.max_pages + j)] = 0;
  }
  const DecodeTensors ref_tensors = safe.host_tensors();
  ref::Result exact = ref::decode(p, ref_tensors);
  ref::Result low = ref::decode(p, ref_tensors, ref::Options{ref::Method::kLowPrecision});
  keep_sequences(p, a.nan_sequences, &exact.out, &exact.lse);
  keep_sequences(p, a.nan_sequences, &low.out, &low.lse);
  keep_sequences(p, a.nan_sequences, &out, &lse);
  const Comparison cmp = compare_with_reference(exact, low, out, lse);
  return cmp.passed ? "" : "the other sequences do not match the reference: " + cmp.summary();
}

std::vector<DecodeAttack> decode_attacks(uint64_t seed) {
  const Base base = random_base(seed);
  const DecodeProblem& bp = base.spec.problem;
  const int victim = int(seed % uint64_t(bp.batch));
  const bool paged = bp.page_size > 0;
  const KvFormat format = detail::resolve_kv_format(bp.kv_format, bp.dtype);
  const detail::KvScales scales = detail::kv_format_traits(format).scales;
  const bool channel_keys = detail::kv_format_traits(format).channel_keys;  // *_kc
  AttackList<DecodeAttack> list;
  list.prototype.spec = base.spec;
  list.prototype.options = base.options;
  list.tag = " [seed " + std::to_string(seed) + ": " + base.name + "]";
  std::vector<DecodeAttack>& attacks = list.attacks;
  auto attack = [&](std::string what, Promise promise) -> DecodeAttack& { return list.attack(std::move(what), promise); };
  auto named = [&](std::string what, std::string argument) -> DecodeAttack& {
    return list.named(std::move(what), std::move(argument));
  };
  auto nan_in = [&](std::string what, std::function<void(DecodeCase&)> edit) -> DecodeAttack& {
    DecodeAttack& a = attack(std::move(what), Promise::kNanIn);
    a.edit_case = std::move(edit);
    a.hide_host_copies = true;
    a.nan_sequences = {victim};
    return a;
  };
  const int b = victim;

  // ---- device lengths: NaN in that sequence only ------------------------------------------------
  for (const auto& [what, value] : std::vector<std::pair<std::string, int64_t>>{
           {"length -1", -1}, {"length INT_MIN", INT_MIN}, {"length INT_MAX", INT_MAX}}) {
    nan_in(what, [b, value = int32_t(value)](DecodeCase& c) { c.seq_lens[size_t(b)] = value; });
  }
  nan_in("length max_kv_len + 1", [b](DecodeCase& c) { c.seq_lens[size_t(b)] = c.problem.max_kv_len + 1; });
  nan_in("length past the capacity", [b](DecodeCase& c) { c.seq_lens[size_t(b)] = int32_t(capacity_of(c) + 1); });
  {
    // The plan's bound below the data: the same cache planned for one key fewer than the victim's
    // (every route's rule); the other sequences within the bound.
    const int bound = bp.max_kv_len - 1;
    DecodeAttack& a = nan_in("length in (max_kv_len, capacity]", [b, bound](DecodeCase& c) {
      c.problem.max_kv_len = bound;
      for (int32_t& len : c.seq_lens) len = std::min(len, bound);
      c.seq_lens[size_t(b)] = bound + 1;
    });
    a.spec.seq_lens[size_t(b)] = bp.max_kv_len;
    a.plan_max_kv_len = bound;
  }

  // ---- device page ids: NaN when inside the used pages, no effect past them --------------------
  if (paged) {
    const int used = (base.spec.seq_lens[size_t(b)] + bp.page_size - 1) / bp.page_size;
    for (const auto& [what, value] : std::vector<std::pair<std::string, int64_t>>{
             {"page id -1", -1}, {"page id past the pool", 1 << 30}, {"page id INT_MIN", INT_MIN}}) {
      if (used == 0) break;
      nan_in(what, [b, used, value = int32_t(value)](DecodeCase& c) {
        c.block_table[size_t(b * c.max_pages + (used - 1))] = value;
      });
    }
    const int max_pages = (bp.max_kv_len + bp.page_size - 1) / bp.page_size;
    if (used < max_pages) {
      DecodeAttack& a = attack("page id -1 past the sequence's pages", Promise::kMatchesReference);
      a.hide_host_copies = true;
      a.edit_case = [b, used](DecodeCase& c) { c.block_table[size_t(b * c.max_pages + used)] = -1; };
    }
    // A window's pages wholly before its start edge are never read by the decode kernels
    // (docs/CONTRACTS.md): an invalid id there changes nothing. Only the call sees the bad id (the
    // fp64 reference reads every page up to the length). Not on the chunked-prefill route, whose
    // dequantized copy reads every page.
    const int first = detail::first_visible_key(base.spec.seq_lens[size_t(b)], 0, bp.q_len, bp.window_left);
    const int before = first / 64 * 64 / bp.page_size - 1;  // wholly before the 64-key block edge too
    Plan routed;
    if (bp.window_left >= 0 && before >= 0 && plan_decode(bp, DeviceInfo::h200(), base.options, &routed).ok() &&
        !routed.decode_via_prefill()) {
      DecodeAttack& a = attack("page id -1 before the window's start edge", Promise::kMatchesReference);
      a.hide_host_copies = true;
      auto table = std::make_shared<std::vector<int32_t>>();
      a.edit_tensors = [b, before, table](DecodeTensors& t) {
        const TensorRef& bt = t.block_table;
        table->assign(size_t(bt.shape[0] * bt.shape[1]), 0);
        for (int64_t i = 0; i < bt.shape[0]; ++i) {
          for (int64_t j = 0; j < bt.shape[1]; ++j) {
            (*table)[size_t(i * bt.shape[1] + j)] = static_cast<const int32_t*>(bt.data)[i * bt.stride[0] + j * bt.stride[1]];
          }
        }
        (*table)[size_t(b * bt.shape[1] + before)] = -1;
        t.block_table = TensorRef::contiguous(table->data(), DType::kI32, {bt.shape[0], bt.shape[1]});
      };
    }
    if (used > 0) {
      DecodeAttack& a = named("host copy of a page id past the pool",
                              "block_table[" + std::to_string(b) + "][" + std::to_string(used - 1) + "]");
      a.edit_case = [b, used](DecodeCase& c) { c.block_table[size_t(b * c.max_pages + (used - 1))] = 1 << 30; };
    }
  }

  // ---- keys_after (context shards): a negative count is invalid device data ---------------------
  {
    auto after = std::make_shared<std::vector<int32_t>>(size_t(bp.batch), 0);
    (*after)[size_t(b)] = -7;
    DecodeAttack& a = nan_in("keys_after -7", nullptr);
    a.options.tuning.prefill_route = false;  // shards take the decode kernels
    a.options.family.clear();
    // Neither GPU route over a *_kc cache (chunked prefill, decode_kc_n8) takes a context shard.
    if (channel_keys) a.gpu_refuses = "keys_after";
    a.edit_tensors = [after](DecodeTensors& t) {
      t.keys_after = TensorRef::contiguous(after->data(), DType::kI32, {int64_t(after->size())});
    };
  }

  // ---- host copies that break the bound: a named error before anything runs ---------------------
  named("host copy of a length past max_kv_len", "seq_lens[" + std::to_string(b) + "]").edit_case =
      [b](DecodeCase& c) { c.seq_lens[size_t(b)] = c.problem.max_kv_len + 1; };
  named("host copy of a negative length", "seq_lens[" + std::to_string(b) + "]").edit_case =
      [b](DecodeCase& c) { c.seq_lens[size_t(b)] = -1; };

  // ---- attention variants (docs/VARIANTS.md): bad values and tensors are named wherever they run
  named("window_left -2", "window_left").spec.problem.window_left = -2;
  {
    DecodeAttack& a = named("causal with window_right 3", "window_right");
    a.spec.problem.causal = true;
    a.spec.problem.window_right = 3;
  }
  named("softcap NaN", "softcap").spec.problem.softcap = std::numeric_limits<float>::quiet_NaN();
  named("softcap -1", "softcap").spec.problem.softcap = -1.f;
  {
    DecodeAttack& a = named("sinks asked for, no tensor", "sinks.data");
    a.spec.problem.sinks = true;
    if (a.options.merge == Merge::kFused) a.options.merge = Merge::kAuto;  // which folds no sink
    a.edit_tensors = [](DecodeTensors& t) { t.sinks = TensorRef{}; };
  }
  {
    DecodeAttack& a = named("sinks with a fused merge (which folds no sink)", "options.merge");
    a.spec.problem.sinks = true;
    a.options = PlanOptions{};
    a.options.merge = Merge::kFused;
    a.options.num_splits = 4;
  }
  {
    DecodeAttack& a = named("sinks one short", "sinks.shape[0]");
    a.spec.problem.sinks = true;
    if (a.options.merge == Merge::kFused) a.options.merge = Merge::kAuto;  // which folds no sink
    a.edit_tensors = [](DecodeTensors& t) { t.sinks.shape[0] -= 1; };
  }
  {
    DecodeAttack& a = named("sinks tensor without the flag", "sinks");
    a.spec.problem.sinks = false;
    auto sinks = std::make_shared<std::vector<float>>(size_t(bp.num_q_heads), 0.f);
    a.edit_tensors = [sinks](DecodeTensors& t) {
      t.sinks = TensorRef::contiguous(sinks->data(), DType::kF32, {int64_t(sinks->size())});
    };
  }
  {
    DecodeAttack& a = named("tree mask with keys_after", "tree_mask");
    a.spec.problem.tree_mask = true;
    auto after = std::make_shared<std::vector<int32_t>>(size_t(bp.batch), 0);
    a.edit_tensors = [after](DecodeTensors& t) {
      t.keys_after = TensorRef::contiguous(after->data(), DType::kI32, {int64_t(after->size())});
    };
  }
  {
    DecodeAttack& a = named("tree mask rows one byte short", "tree_mask.shape[2]");
    a.spec.problem.tree_mask = true;
    a.edit_tensors = [](DecodeTensors& t) { t.tree_mask.shape[2] = 0; };
  }

  // ---- broadcast (stride 0) inputs: valid, read as the strides say (on the decode kernels: the
  // TMA loads of the prefill route refuse a stride of 0 by name, tests/gpu/test_promises_gpu.cpp)
  const size_t first_broadcast = attacks.size() + 0;
  attack("q heads broadcast (q.stride[2] = 0)", Promise::kMatchesReference).edit_case = [](DecodeCase& c) {
    c.q_ref.stride[2] = 0;
  };
  attack("q queries broadcast (q.stride[1] = 0)", Promise::kMatchesReference).edit_case = [](DecodeCase& c) {
    c.q_ref.stride[1] = 0;
  };
  attack("KV heads broadcast (k/v.stride[2] = 0)", Promise::kMatchesReference).edit_case = [](DecodeCase& c) {
    c.k_ref.stride[2] = c.v_ref.stride[2] = 0;
  };
  {
    DecodeAttack& a = attack("KV tokens broadcast (k/v.stride[1] = 0)", Promise::kMatchesReference);
    a.spec.poison_unused = false;  // every slot of a slab then holds its first token
    a.edit_case = [](DecodeCase& c) { c.k_ref.stride[1] = c.v_ref.stride[1] = 0; };
  }
  {
    DecodeAttack& a = attack("KV slabs broadcast (k/v.stride[0] = 0)", Promise::kMatchesReference);
    a.spec.poison_unused = false;
    a.edit_case = [](DecodeCase& c) { c.k_ref.stride[0] = c.v_ref.stride[0] = 0; };
  }
  if (scales == detail::KvScales::kPerHead) {
    attack("FP8 scales broadcast (k/v_scales.stride[0] = 0)", Promise::kMatchesReference).edit_case =
        [](DecodeCase& c) { c.k_scales_ref.stride[0] = c.v_scales_ref.stride[0] = 0; };
    attack("FP8 scales a column of [Hkv, 2] (stride 2)", Promise::kMatchesReference).edit_case = [](DecodeCase& c) {
      const int64_t hkv = c.problem.num_kv_heads;
      for (ElementBuffer* s : {&c.k_scales, &c.v_scales}) {
        ElementBuffer wide(DType::kF32, size_t(2 * hkv));
        for (int64_t h = 0; h < hkv; ++h) {
          static_cast<float*>(wide.data())[2 * h] = static_cast<const float*>(s->data())[h];
          static_cast<float*>(wide.data())[2 * h + 1] = 1e30f;  // wrecks the output if read
        }
        *s = std::move(wide);
      }
      c.k_scales_ref.stride[0] = c.v_scales_ref.stride[0] = 2;
    };
  } else if (scales == detail::KvScales::kPerTokenPair) {
    attack("per-token scale pairs of one head for all (k/v_scales.stride[1] = 0)", Promise::kMatchesReference)
        .edit_case = [](DecodeCase& c) { c.k_scales_ref.stride[1] = c.v_scales_ref.stride[1] = 0; };
  }

  for (size_t i = first_broadcast; i < attacks.size(); ++i) {
    attacks[i].options.tuning.prefill_route = false;
    if (attacks[i].options.family.rfind("prefill_sm90", 0) == 0) attacks[i].options.family.clear();
    // A *_kc cache's decode runs as chunked prefill, whose Hopper families' TMA refuses a stride of
    // 0 by name: the plain-load family takes it.
    if (channel_keys) attacks[i].options.family = "prefill_mma";
  }

  // ---- strides the kernels cannot take, and outputs that overlap: named errors --------------------
  named("odd q row stride", "q.stride[1]").edit_case = [](DecodeCase& c) { c.q_ref.stride[1] += 1; };
  named("negative k token stride", "k.stride[1]").edit_case = [](DecodeCase& c) { c.k_ref.stride[1] = -c.k_ref.stride[1]; };
  if (format == KvFormat::kNative) {
    named("k head stride of 4 elements (rows not 16-byte aligned)", "k.stride[2]").edit_case = [](DecodeCase& c) {
      c.k_ref.stride[2] = 4;
    };
  }
  if (bp.num_q_heads > 1) {
    named("out heads on one row (out.stride[2] = 0)", "out.stride[2]").edit_tensors = [](DecodeTensors& t) {
      t.out.stride[2] = 0;
    };
  }
  named("lse sequences on one row (lse.stride[0] = 0)", "lse.stride[0]").edit_tensors = [](DecodeTensors& t) {
    t.lse.stride[0] = 0;
  };
  named("out not contiguous in the head dim", "out.stride[3]").edit_tensors = [](DecodeTensors& t) {
    t.out.stride[3] = 2;
  };
  named("missing seq_lens", "seq_lens.data").edit_tensors = [](DecodeTensors& t) { t.seq_lens.data = nullptr; };
  named("misaligned k", "k.data").edit_tensors = [](DecodeTensors& t) {
    t.k.data = static_cast<char*>(t.k.data) + 1;
  };

  // ---- options that cannot take effect or contradict each other ----------------------------------
  auto option = [&](std::string what, std::string argument, void (*edit)(PlanOptions&)) {
    DecodeAttack& a = named(std::move(what), std::move(argument));
    a.options = PlanOptions{};
    edit(a.options);
  };
  option("a merge that is no Merge value", "options.merge", [](PlanOptions& o) { o.merge = static_cast<Merge>(99); });
  option("L2 prefetch of more keys than max_kv_len", "options.tuning.l2_prefetch_keys",
         [](PlanOptions& o) { o.tuning.l2_prefetch_keys = (1 << 30) + 1; });
  option("L2 prefetch of -2 keys", "options.tuning.l2_prefetch_keys",
         [](PlanOptions& o) { o.tuning.l2_prefetch_keys = -2; });
  option("split_tokens not a multiple of the KV block", "options.split_tokens",
         [](PlanOptions& o) { o.split_tokens = 100; });
  option("negative num_splits", "options.num_splits", [](PlanOptions& o) { o.num_splits = -1; });
  option("num_splits above max_splits", "options.num_splits", [](PlanOptions& o) {
    o.num_splits = 5;
    o.max_splits = 2;
  });
  option("atomic merge in batch-invariant mode", "options.merge", [](PlanOptions& o) {
    o.merge = Merge::kAtomic;
    o.split_tokens = 1024;
  });
  option("a prefill strategy for decode", "options.strategy", [](PlanOptions& o) { o.strategy = Strategy::kTwoPass; });
  option("an unknown family", "options.family", [](PlanOptions& o) { o.family = "no_such_family"; });

  // ---- problems the API does not take ------------------------------------------------------------
  named("q_len 17", "q_len").spec.problem.q_len = 17;
  named("head dim 96", "head_dim").spec.problem.head_dim = 96;
  named("max_kv_len past 2^30", "max_kv_len").spec.problem.max_kv_len = (1 << 30) + 1;
  named("page size 8", "page_size").spec.problem.page_size = 8;
  named("NaN softmax scale", "softmax_scale").spec.problem.softmax_scale = std::nanf("");

  // ---- plans edited after planning ---------------------------------------------------------------
  named("plan edited: block_m = 0", "plan").edit_plan = [](Plan& p) { detail::PlanEditor::fields(p).block_m = 0; };
  named("plan edited: num_splits = 0", "plan").edit_plan = [](Plan& p) { detail::PlanEditor::fields(p).num_splits = 0; };
  named("plan edited: another batch", "plan").edit_plan = [](Plan& p) { detail::PlanEditor::fields(p).decode.batch += 1; };
  named("plan edited: another workspace size", "plan").edit_plan = [](Plan& p) { detail::PlanEditor::fields(p).workspace_bytes += 16; };

  // ---- device descriptions -----------------------------------------------------------------------
  named("device with 0 SMs", "device.sm_count").device.sm_count = 0;
  named("device with -4 SMs", "device.sm_count").device.sm_count = -4;
  named("device of compute capability 0.0", "device.cc_major").device.cc_major = 0;
  named("device of compute capability 7.0 (no kernels)", "device").device.cc_major = 7;

  // ---- workspaces (a plan with splits; the *_kc formats' plans stage the cache in theirs) ----------
  {
    auto split = [&](std::string what, std::string argument) -> DecodeAttack& {
      DecodeAttack& a = named(std::move(what), std::move(argument));
      a.options = PlanOptions{};
      a.options.num_splits = 3;
      a.spec.problem.window_left = -1;  // a short window would leave one split and no workspace
      a.spec.problem.max_kv_len = std::max(bp.max_kv_len, 512);
      for (int& len : a.spec.seq_lens) len = std::min(len, a.spec.problem.max_kv_len);
      return a;
    };
    split("workspace one byte short", "workspace_bytes").workspace_delta = -1;
    split("no workspace", "workspace").workspace_null = true;
    split("workspace misaligned by 8 bytes", "workspace").workspace_offset = 8;
  }
  return attacks;
}

// ---- prefill --------------------------------------------------------------------------------------------

namespace {

struct PrefillBase {
  PrefillCaseSpec spec;
  PlanOptions options;
  std::string name;
};

PrefillBase random_prefill_base(uint64_t seed) {
  std::mt19937_64 rng(seed * 0xd1b54a32d192ed03ull + 7);
  auto pick = [&](int n) { return int(rng() % uint64_t(n)); };
  const int heads[][2] = {{4, 2}, {8, 8}, {16, 4}, {6, 1}};
  const int* h = heads[pick(4)];
  PrefillBase b;
  PrefillProblem& p = b.spec.problem;
  p.batch = 2 + pick(3);
  p.num_q_heads = h[0];
  p.num_kv_heads = h[1];
  p.head_dim = 128;
  p.varlen = true;
  p.causal = pick(2) == 1;
  b.spec.seed = seed;
  for (int i = 0; i < p.batch; ++i) {
    const int q = 1 + pick(160), k = q + pick(3000);
    b.spec.q_lens.push_back(q);
    b.spec.kv_lens.push_back(k);
    p.max_q_len = std::max(p.max_q_len, q);
    p.max_kv_len = std::max(p.max_kv_len, k);
  }
  switch (pick(3)) {
    case 0: break;  // the planner's choice (KV splits for short chunks over long keys)
    case 1:
      b.options.strategy = Strategy::kSplitKV;
      b.options.num_splits = 3;
      break;
    default: b.options.family = "prefill_mma"; break;
  }
  b.name = "prefill B=" + std::to_string(p.batch) + " " + std::to_string(p.num_q_heads) + "/" +
           std::to_string(p.num_kv_heads) + (p.causal ? " causal" : "") + " max_q " + std::to_string(p.max_q_len) +
           " max_k " + std::to_string(p.max_kv_len) + " splits " + std::to_string(b.options.num_splits) +
           (b.options.family.empty() ? "" : " family " + b.options.family) +
           (p.window_left >= 0 ? " window " + std::to_string(p.window_left) : "") + (p.softcap > 0.f ? " softcap 30" : "") +
           (p.sinks ? " sinks" : "");
  return b;
}

// Sequence b's tokens [cu[b], cu[b + 1]) of a case.
std::pair<int64_t, int64_t> token_range(const PrefillCase& c, int b) {
  return {c.cu_seqlens_q[size_t(b)], c.cu_seqlens_q[size_t(b) + 1]};
}

}  // namespace

PrefillCase attack_case(const PrefillAttack& attack) {
  PrefillCase c = make_prefill_case(attack.spec);
  if (attack.edit_case) attack.edit_case(c);
  poison_outputs(c);
  return c;
}

PrefillTensors attack_tensors(const PrefillAttack& attack, PrefillCase& c) {
  PrefillTensors t = c.host_tensors();
  if (!attack.device_cu_seqlens_q.empty()) t.cu_seqlens_q_host = nullptr;
  if (!attack.device_cu_seqlens_k.empty()) t.cu_seqlens_k_host = nullptr;
  if (attack.edit_tensors) attack.edit_tensors(t);
  return t;
}

std::string judge(const PrefillAttack& a, const Status& planned, const Status& ran, PrefillCase& c) {
  if (a.promise == Promise::kNamedError) return judge_named_error(planned, ran, a.argument);
  if (!planned.ok()) return "planning failed: " + planned.message();
  if (!ran.ok()) return "the call failed: " + ran.message();
  if (a.promise == Promise::kMatchesReference) {
    const Comparison cmp = check_prefill(c);
    return cmp.passed ? "" : "does not match the reference: " + cmp.summary();
  }
  const PrefillTensors host = c.host_tensors();  // the valid host cu_seqlens: the reference's
  const std::vector<double> out = dense_values(host.out), lse = dense_values(host.lse);
  const int64_t Hq = c.problem.num_q_heads, D = c.problem.head_dim, total = host.q.shape[0];
  for (int64_t t = a.nan_begin; t < a.nan_end; ++t) {
    for (int64_t i = 0; i < Hq * D; ++i) {
      if (!std::isnan(out[size_t(t * Hq * D + i)])) return "token " + std::to_string(t) + ": O is not NaN";
    }
    for (int64_t h = 0; h < Hq; ++h) {
      if (!std::isnan(lse[size_t(h * total + t)])) return "token " + std::to_string(t) + ": LSE is not NaN";
    }
  }
  const ref::Result exact = ref::prefill(c.problem, host);
  const ref::Result low = ref::prefill(c.problem, host, ref::Options{ref::Method::kLowPrecision});
  ref::Result e, l;
  std::vector<double> o, s;
  for (int b : a.intact) {
    const auto [t0, t1] = token_range(c, b);
    e.out.insert(e.out.end(), exact.out.begin() + t0 * Hq * D, exact.out.begin() + t1 * Hq * D);
    l.out.insert(l.out.end(), low.out.begin() + t0 * Hq * D, low.out.begin() + t1 * Hq * D);
    o.insert(o.end(), out.begin() + t0 * Hq * D, out.begin() + t1 * Hq * D);
    for (int64_t h = 0; h < Hq; ++h) {
      e.lse.insert(e.lse.end(), exact.lse.begin() + h * total + t0, exact.lse.begin() + h * total + t1);
      l.lse.insert(l.lse.end(), low.lse.begin() + h * total + t0, low.lse.begin() + h * total + t1);
      s.insert(s.end(), lse.begin() + h * total + t0, lse.begin() + h * total + t1);
    }
  }
  const Comparison cmp = compare_with_reference(e, l, o, s);
  return cmp.passed ? "" : "the other sequences do not match the reference: " + cmp.summary();
}

std::vector<PrefillAttack> prefill_attacks(uint64_t seed) {
  const PrefillBase base = random_prefill_base(seed);
  const PrefillProblem& bp = base.spec.problem;
  const int B = bp.batch;
  AttackList<PrefillAttack> list;
  list.prototype.spec = base.spec;
  list.prototype.options = base.options;
  list.tag = " [seed " + std::to_string(seed) + ": " + base.name + "]";
  std::vector<PrefillAttack>& attacks = list.attacks;
  auto attack = [&](std::string what, Promise promise) -> PrefillAttack& { return list.attack(std::move(what), promise); };
  auto named = [&](std::string what, std::string argument) -> PrefillAttack& {
    return list.named(std::move(what), std::move(argument));
  };
  // The case's offsets, for the device attacks' expectations.
  std::vector<int32_t> cu_q(1, 0), cu_k(1, 0);
  for (int b = 0; b < B; ++b) {
    cu_q.push_back(cu_q.back() + base.spec.q_lens[size_t(b)]);
    cu_k.push_back(cu_k.back() + base.spec.kv_lens[size_t(b)]);
  }
  std::vector<int> all_but_last, all_but_first;
  for (int b = 0; b < B; ++b) (b + 1 < B ? all_but_last : all_but_first).push_back(b);
  all_but_first.clear();
  for (int b = 1; b < B; ++b) all_but_first.push_back(b);

  attack("plain (a control)", Promise::kMatchesReference);

  // ---- device offsets: NaN in that sequence's (clamped) rows; tensors hold 3 tokens past the last one.
  const int64_t total_q = cu_q.back() + 3;
  for (const auto& [what, value] : std::vector<std::pair<std::string, int64_t>>{
           {"cu_seqlens_q[B] past the tensor", total_q + 100}, {"cu_seqlens_q[B] INT_MAX", INT_MAX},
           {"cu_seqlens_q[B] INT_MIN", INT_MIN}, {"cu_seqlens_q[B] before cu_seqlens_q[B-1]", cu_q[size_t(B) - 1] - 1}}) {
    PrefillAttack& a = attack("device " + what, Promise::kNanIn);
    a.device_cu_seqlens_q = cu_q;
    a.device_cu_seqlens_q.back() = int32_t(value);
    const detail::VarlenRows rows = detail::varlen_rows(a.device_cu_seqlens_q.data(), B - 1, total_q, bp.max_q_len);
    a.nan_begin = rows.begin;
    a.nan_end = rows.begin + rows.len;
    a.intact = all_but_last;
  }
  {
    PrefillAttack& a = attack("device cu_seqlens_q[0] = -5", Promise::kNanIn);
    a.device_cu_seqlens_q = cu_q;
    a.device_cu_seqlens_q[0] = -5;
    const detail::VarlenRows rows = detail::varlen_rows(a.device_cu_seqlens_q.data(), 0, total_q, bp.max_q_len);
    a.nan_begin = rows.begin;
    a.nan_end = rows.begin + rows.len;
    a.intact = all_but_first;
  }
  {
    PrefillAttack& a = attack("device cu_seqlens_k[B] past the keys", Promise::kNanIn);
    a.device_cu_seqlens_k = cu_k;
    a.device_cu_seqlens_k.back() = cu_k.back() + 1000;
    a.nan_begin = cu_q[size_t(B) - 1];
    a.nan_end = cu_q[size_t(B)];
    a.intact = all_but_last;
  }

  // ---- host copies, layouts, outputs, options, plans: named errors before anything runs ----------
  named("host cu_seqlens_q decreasing", "cu_seqlens_q[" + std::to_string(B) + "]").edit_case = [B](PrefillCase& c) {
    c.cu_seqlens_q[size_t(B)] = c.cu_seqlens_q[size_t(B) - 1] - 1;
  };
  named("host cu_seqlens_k longer than max_kv_len", "cu_seqlens_k[1]").edit_case = [](PrefillCase& c) {
    c.cu_seqlens_k[1] = c.cu_seqlens_k[0] + c.problem.max_kv_len + 1;
  };
  named("out heads on one row", "out.stride[1]").edit_tensors = [](PrefillTensors& t) { t.out.stride[1] = 0; };
  named("lse heads on one row", "lse.stride[0]").edit_tensors = [](PrefillTensors& t) { t.lse.stride[0] = 0; };
  named("odd q token stride", "q.stride[0]").edit_tensors = [](PrefillTensors& t) { t.q.stride[0] += 1; };
  named("negative k token stride", "k.stride[0]").edit_tensors = [](PrefillTensors& t) { t.k.stride[0] = -t.k.stride[0]; };
  named("missing cu_seqlens_k", "cu_seqlens_k.data").edit_tensors = [](PrefillTensors& t) {
    t.cu_seqlens_k.data = nullptr;
  };
  auto option = [&](std::string what, std::string argument, void (*edit)(PlanOptions&)) {
    PrefillAttack& a = named(std::move(what), std::move(argument));
    a.options = PlanOptions{};
    edit(a.options);
  };
  option("batch-invariant splits", "options.split_tokens", [](PlanOptions& o) { o.split_tokens = 1024; });
  option("a fused merge", "options.merge", [](PlanOptions& o) { o.merge = Merge::kFused; });
  option("a cluster merge", "options.merge", [](PlanOptions& o) { o.merge = Merge::kCluster; });
  option("an atomic merge", "options.merge", [](PlanOptions& o) { o.merge = Merge::kAtomic; });
  option("a merge that is no Merge value", "options.merge", [](PlanOptions& o) { o.merge = static_cast<Merge>(-1); });
  option("an L2 key prefetch", "options.tuning.l2_prefetch_keys",
         [](PlanOptions& o) { o.tuning.l2_prefetch_keys = 32; });
  option("split-v with splits", "options.num_splits", [](PlanOptions& o) {
    o.strategy = Strategy::kSplitV;
    o.num_splits = 2;
  });
  named("plan edited: block_m = 0", "plan").edit_plan = [](Plan& p) { detail::PlanEditor::fields(p).block_m = 0; };
  named("plan edited: num_splits + 1", "plan").edit_plan = [](Plan& p) { detail::PlanEditor::fields(p).num_splits += 1; };
  named("max_q_len past 2^30", "max_q_len").spec.problem.max_q_len = (1 << 30) + 1;
  // The attention variants (docs/VARIANTS.md): bad values and tensors named before anything runs.
  named("window_left -2", "window_left").spec.problem.window_left = -2;
  named("softcap -1", "softcap").spec.problem.softcap = -1.f;
  {
    PrefillAttack& a = named("sinks asked for, no tensor", "sinks.data");
    a.spec.problem.sinks = true;
    a.edit_tensors = [](PrefillTensors& t) { t.sinks = TensorRef{}; };
  }
  {
    PrefillAttack& a = named("sinks two short", "sinks.shape[0]");
    a.spec.problem.sinks = true;
    a.edit_tensors = [](PrefillTensors& t) { t.sinks.shape[0] -= 2; };
  }
  // KV heads broadcast by a stride of 0: read as such by plain loads, refused by name by TMA.
  {
    PrefillAttack& a = attack("KV heads broadcast on prefill_mma", Promise::kMatchesReference);
    a.options = PlanOptions{};
    a.options.family = "prefill_mma";
    a.edit_case = [](PrefillCase& c) { c.k_ref.stride[1] = c.v_ref.stride[1] = 0; };
  }
  return attacks;
}

// ---- run_combine ----------------------------------------------------------------------------------------

CombineTensors CombineCase::host_tensors() {
  const CombineProblem& p = problem;
  const int64_t S = p.num_splits, rows = int64_t(p.batch) * p.seq_len, H = p.num_heads, D = p.head_dim;
  CombineTensors t;
  t.partial_o = TensorRef::contiguous(partial_o.data(), DType::kF32, {S, rows, H, D});
  t.partial_lse = TensorRef::contiguous(partial_lse.data(), DType::kF32, {S, rows, H});
  t.out = TensorRef::contiguous(out.data(), p.dtype, {p.batch, p.seq_len, H, D});
  t.lse = TensorRef::contiguous(lse.data(), DType::kF32, {p.batch, H, p.seq_len});
  return t;
}

CombineCase attack_case(const CombineAttack& a) {
  CombineCase c;
  c.problem = a.problem;
  const CombineProblem& p = a.problem;
  const size_t rows = size_t(p.batch) * p.seq_len * p.num_heads;
  c.partial_o.resize(size_t(p.num_splits) * rows * p.head_dim);
  c.partial_lse.resize(size_t(p.num_splits) * rows);
  std::mt19937_64 rng(a.seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& x : c.partial_o) x = normal(rng);
  for (float& x : c.partial_lse) x = 3.f * normal(rng);
  c.out.assign(rows * p.head_dim, nan_bits(p.dtype));
  c.lse.assign(rows, std::nanf(""));
  if (a.edit_case) a.edit_case(c);
  return c;
}

std::string judge(const CombineAttack& a, const Status& ran, const CombineCase& c) {
  if (a.promise == Promise::kNamedError) return judge_named_error(Status::success(), ran, a.argument);
  if (!ran.ok()) return "the call failed: " + ran.message();
  const CombineProblem& p = c.problem;
  const int64_t S = p.num_splits, H = p.num_heads, L = p.seq_len, D = p.head_dim, rows = int64_t(p.batch) * L * H;
  std::vector<double> lses(static_cast<size_t>(S));
  for (int64_t row = 0; row < rows; ++row) {  // row = (b * L + i) * H + h
    const int64_t h = row % H, i = row / H % L, b = row / H / L;
    bool nan_row = false;
    for (int64_t s = 0; s < S; ++s) {
      lses[size_t(s)] = c.partial_lse[size_t(s * rows + row)];
      nan_row |= std::isnan(lses[size_t(s)]);
    }
    const float got_lse = c.lse[size_t((b * H + h) * L + i)];
    if (nan_row) {
      if (!std::isnan(got_lse)) return "row " + std::to_string(row) + ": a NaN partial LSE, but the LSE is not NaN";
      for (int64_t j = 0; j < D; ++j) {
        if (!std::isnan(detail::half_bits_to_float(c.out[size_t(row * D + j)], p.dtype))) {
          return "row " + std::to_string(row) + ": a NaN partial LSE, but O is not NaN";
        }
      }
      continue;
    }
    const double want_lse = detail::combined_lse(lses.data(), int(S), 1);
    if (std::isinf(want_lse) ? !(std::isinf(got_lse) && got_lse < 0)
                             : !(std::fabs(got_lse - want_lse) <= 1e-5 * std::max(1.0, std::fabs(want_lse)))) {
      return "row " + std::to_string(row) + ": LSE " + std::to_string(got_lse) + ", expected " + std::to_string(want_lse);
    }
    for (int64_t j = 0; j < D; ++j) {
      double want = 0;
      for (int64_t s = 0; s < S; ++s) {
        want += detail::combine_term(detail::combine_weight(lses[size_t(s)], want_lse),
                                     double(c.partial_o[size_t((s * rows + row) * D + j)]));
      }
      const double got = detail::half_bits_to_float(c.out[size_t(row * D + j)], p.dtype);
      if (!(std::fabs(got - want) <= std::fabs(want) / 128 + 1e-6)) {
        return "row " + std::to_string(row) + " column " + std::to_string(j) + ": " + std::to_string(got) +
               ", expected " + std::to_string(want);
      }
    }
  }
  return "";
}

std::vector<CombineAttack> combine_attacks(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x2545f4914f6cdd1dull + 3);
  const int split_counts[] = {1, 2, 7, 8, 9, 17, 40, 70};
  CombineProblem base;
  base.num_splits = split_counts[rng() % 8];
  base.batch = 1 + int(rng() % 3);
  base.seq_len = 1 + int(rng() % 4);
  base.num_heads = 1 + int(rng() % 4);
  base.head_dim = 128;
  const std::string tag = " [seed " + std::to_string(seed) + ": S=" + std::to_string(base.num_splits) + " B=" +
                          std::to_string(base.batch) + " L=" + std::to_string(base.seq_len) + " H=" +
                          std::to_string(base.num_heads) + "]";
  const int S = base.num_splits;
  const int64_t rows = int64_t(base.batch) * base.seq_len * base.num_heads;
  AttackList<CombineAttack> list;
  list.prototype.problem = base;
  list.prototype.seed = seed;
  list.tag = tag;
  std::vector<CombineAttack>& attacks = list.attacks;
  auto attack = [&](std::string what, Promise promise) -> CombineAttack& { return list.attack(std::move(what), promise); };
  auto named = [&](std::string what, std::string argument) -> CombineAttack& {
    return list.named(std::move(what), std::move(argument));
  };
  attack("plain (a control)", Promise::kMatchesReference);
  // Device values: empty partials holding NaN or Inf in O take no part; a NaN LSE poisons its row
  // only; a row of empty partials is O = 0, LSE = -inf.
  attack("empty partials with NaN and Inf in O", Promise::kMatchesReference).edit_case = [S, rows](CombineCase& c) {
    const int64_t D = c.problem.head_dim;
    for (int64_t row = 0; row < rows; row += 2) {
      const int64_t s = row % S;
      c.partial_lse[size_t(s * rows + row)] = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < D; ++j) {
        c.partial_o[size_t((s * rows + row) * D + j)] = j % 2 ? std::numeric_limits<float>::infinity() : std::nanf("");
      }
    }
  };
  attack("a row of empty partials with NaN in O", Promise::kMatchesReference).edit_case = [S, rows](CombineCase& c) {
    const int64_t D = c.problem.head_dim;
    for (int64_t s = 0; s < S; ++s) {
      c.partial_lse[size_t(s * rows + rows - 1)] = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < D; ++j) c.partial_o[size_t((s * rows + rows - 1) * D + j)] = std::nanf("");
    }
  };
  attack("a NaN partial LSE", Promise::kMatchesReference).edit_case = [S, rows](CombineCase& c) {
    c.partial_lse[size_t((S - 1) * rows + 0)] = std::nanf("");
  };
  // The call's arguments: named errors before anything runs.
  named("no splits", "num_splits").problem.num_splits = 0;
  named("head dim 96", "head_dim").problem.head_dim = 96;
  named("fp32 output", "dtype").problem.dtype = DType::kF32;
  if (base.num_heads > 1) {  // a dimension of extent 1 may carry any stride
    named("partial_o not row-major", "partial_o.stride[2]").edit_tensors = [](CombineTensors& t) {
      t.partial_o.stride[2] += 4;
    };
  }
  named("partial_lse in fp16", "partial_lse.dtype").edit_tensors = [](CombineTensors& t) {
    t.partial_lse.dtype = DType::kF16;
  };
  named("missing partial_o", "partial_o.data").edit_tensors = [](CombineTensors& t) { t.partial_o.data = nullptr; };
  if (base.num_heads > 1) {
    named("out heads on one row", "out.stride[2]").edit_tensors = [](CombineTensors& t) { t.out.stride[2] = 0; };
  }
  if (base.batch > 1) {
    named("lse sequences on one row", "lse.stride[0]").edit_tensors = [](CombineTensors& t) { t.lse.stride[0] = 0; };
  }
  named("out of another shape", "out.shape[1]").edit_tensors = [](CombineTensors& t) { t.out.shape[1] += 1; };
  return attacks;
}

}  // namespace splitkv::testing::hostile
