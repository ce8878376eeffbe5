#include "plan/plan_seal.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

namespace splitkv::detail {
namespace {

// A 64-bit multiply-xor mix, one step per field (the value widened to 64 bits; strings in 8-byte
// chunks): run_* hashes the plan on every call, so this stays a few dozen instructions.
class Hasher {
 public:
  template <class T>
  void add(const T& value) {
    static_assert((std::is_arithmetic_v<T> || std::is_enum_v<T>) && sizeof(T) <= 8);
    uint64_t word = 0;
    std::memcpy(&word, &value, sizeof(T));
    mix(word);
  }
  void add(const std::string& s) {
    mix(s.size());
    for (size_t i = 0; i < s.size(); i += 8) {
      uint64_t word = 0;
      std::memcpy(&word, s.data() + i, std::min<size_t>(8, s.size() - i));
      mix(word);
    }
  }
  uint64_t value() const { return h_ ^ (h_ >> 29); }

 private:
  void mix(uint64_t word) {
    h_ ^= word + 0x9e3779b97f4a7c15ull + (h_ << 6) + (h_ >> 2);
    h_ *= 0xbf58476d1ce4e5b9ull;
  }
  uint64_t h_ = 14695981039346656037ull;
};

void add(Hasher& h, const DecodeProblem& p) {
  h.add(p.batch), h.add(p.num_q_heads), h.add(p.num_kv_heads), h.add(p.head_dim), h.add(p.q_len);
  h.add(p.max_kv_len), h.add(p.page_size), h.add(p.causal), h.add(p.dtype), h.add(p.kv_format);
  h.add(p.softmax_scale), h.add(p.window_left), h.add(p.window_right), h.add(p.softcap), h.add(p.sinks);
  h.add(p.tree_mask);
}

void add(Hasher& h, const PrefillProblem& p) {
  h.add(p.batch), h.add(p.num_q_heads), h.add(p.num_kv_heads), h.add(p.head_dim), h.add(p.max_q_len);
  h.add(p.max_kv_len), h.add(p.varlen), h.add(p.causal), h.add(p.dtype), h.add(p.kv_format);
  h.add(p.softmax_scale), h.add(p.kv_cache), h.add(p.page_size), h.add(p.window_left), h.add(p.window_right);
  h.add(p.softcap), h.add(p.sinks);
}

void add(Hasher& h, const DeviceInfo& d) {
  h.add(d.sm_count), h.add(d.smem_per_sm_bytes), h.add(d.smem_per_block_bytes), h.add(d.l2_bytes);
  h.add(d.cc_major), h.add(d.cc_minor);
}

}  // namespace

uint64_t plan_seal(const Plan& plan) {
  const PlanFields& p = PlanEditor::fields(plan);
  Hasher h;
  h.add(p.kind);
  add(h, p.decode);
  add(h, p.prefill);
  add(h, p.device);
  h.add(p.strategy), h.add(p.family), h.add(p.num_splits), h.add(p.split_tokens);
  h.add(p.cluster_combine), h.add(p.fused_combine), h.add(p.atomic_combine), h.add(p.atomic_reference_lse);
  h.add(p.l2_prefetch), h.add(p.l2_prefetch_keys), h.add(p.dequantized_cache), h.add(p.staging_bytes);
  h.add(p.block_m), h.add(p.block_n), h.add(p.warps), h.add(p.stages), h.add(p.smem_bytes);
  h.add(p.blocks_per_sm), h.add(p.launch_smem_bytes), h.add(p.register_bound_blocks), h.add(p.work_units);
  h.add(p.short_twin_warps);
  for (int g : p.grid) h.add(g);
  h.add(p.persistent_blocks), h.add(p.dynamic_tiles), h.add(p.stream_k), h.add(p.stream_k_first_tile);
  h.add(p.stream_k_steps), h.add(p.stream_k_workspace_offset), h.add(p.packed_queries);
  h.add(p.decode_via_prefill), h.add(p.workspace_bytes);
  h.add(p.mixed_decode != nullptr ? p.mixed_decode->seal() : uint64_t(0)), h.add(p.mixed_decode_q), h.add(p.mixed_serial);
  h.add(p.mixed_beside_blocks);
  h.add(p.mixed_spec != nullptr ? p.mixed_spec->seal() : uint64_t(0));
  h.add(p.mixed_decode_offset), h.add(p.mixed_spec_offset), h.add(p.mixed_scratch_offset);
  // Never 0, so a default-constructed Plan (seal 0) is never taken for a planned one.
  return h.value() | 1;
}

Status check_plan_seal(const Plan& plan) {
  if (plan.seal() == plan_seal(plan)) return Status::success();
  return Status::invalid("plan",
                         "a plan as plan_decode / plan_prefill returned it (plan again to change it; its fields "
                         "size the grid, the partials and the workspace)",
                         plan.seal() == 0 ? "a plan that was never planned" : "a plan whose fields changed after planning");
}

}  // namespace splitkv::detail
