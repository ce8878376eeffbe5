// Names and the human-readable plan description (`splitkv plan`). Plain string appends, no
// iostreams: the Python module calls this from processes whose C++ runtime comes from elsewhere
// (torch), and std::locale is the part of it least safe to share.
#include <string>
#include <type_traits>

#include "plan/geometry.hpp"
#include "registry/registry.hpp"
#include "splitkv/plan.hpp"
#include "splitkv/types.hpp"

namespace splitkv {

const char* to_string(Strategy strategy) {
  switch (strategy) {
    case Strategy::kAuto: return "auto";
    case Strategy::kSplitQ: return "split-q";
    case Strategy::kSplitKV: return "split-kv";
    case Strategy::kSplitV: return "split-v";
    case Strategy::kTwoPass: return "two-pass";
  }
  return "unknown";
}

const char* to_string(Merge merge) {
  switch (merge) {
    case Merge::kAuto: return "auto";
    case Merge::kCombineKernel: return "combine-kernel";
    case Merge::kCluster: return "cluster";
    case Merge::kFused: return "fused";
    case Merge::kAtomic: return "atomic";
  }
  return "unknown";
}

namespace {

// Appends each argument: strings as they are, integers in decimal.
struct Text {
  std::string str;
  template <class T>
  Text& operator<<(const T& v) {
    if constexpr (std::is_integral_v<T>) {
      str += std::to_string(v);
    } else {
      str += v;
    }
    return *this;
  }
};

// The attention variants a problem asks for, or nothing (docs/VARIANTS.md).
void describe_variants(Text& s, int left, int right, float softcap, bool sinks, bool tree_mask) {
  if (left < 0 && right < 0 && softcap <= 0.f && !sinks && !tree_mask) return;
  s << "variants:";
  if (left >= 0 || right >= 0) s << " window " << left << "," << right;
  if (softcap > 0.f) s << " softcap " << std::to_string(softcap);
  if (sinks) s << " sinks";
  if (tree_mask) s << " tree-mask";
  s << "\n";
}

}  // namespace

std::string describe(const Plan& p) {
  Text s;
  if (p.kind() == Plan::Kind::kDecode) {
    const DecodeProblem& d = p.decode();
    s << "decode: batch=" << d.batch << " Hq=" << d.num_q_heads << " Hkv=" << d.num_kv_heads
      << " D=" << d.head_dim << " q_len=" << d.q_len << " max_kv_len=" << d.max_kv_len
      << " page_size=" << d.page_size << " causal=" << (d.causal ? 1 : 0) << " dtype=" << to_string(d.dtype)
      << " kv_format=" << to_string(d.kv_format) << "\n";
    describe_variants(s, d.window_left, d.window_right, d.softcap, d.sinks, d.tree_mask);
  } else {
    const PrefillProblem& f = p.prefill();
    s << "prefill: batch=" << f.batch << " Hq=" << f.num_q_heads << " Hkv=" << f.num_kv_heads
      << " D=" << f.head_dim << " max_q_len=" << f.max_q_len << " max_kv_len=" << f.max_kv_len
      << " varlen=" << (f.varlen ? 1 : 0) << " causal=" << (f.causal ? 1 : 0)
      << " dtype=" << to_string(f.dtype) << " kv_format=" << to_string(f.kv_format);
    if (f.kv_cache) s << " kv_cache=1 page_size=" << f.page_size;  // K/V token tensors: nothing to add
    s << "\n";
    describe_variants(s, f.window_left, f.window_right, f.softcap, f.sinks, false);
    if (p.dequantized_cache()) {
      s << "cache: dequantized to " << to_string(f.dtype) << " first (" << p.staging_bytes()
        << " bytes of the workspace), then read as a contiguous cache\n";
    }
  }
  s << "device: " << p.device().sm_count << " SMs, " << p.device().smem_per_sm_bytes / 1024 << " KB smem/SM, "
    << p.device().l2_bytes / (1024 * 1024) << " MB L2, sm_" << p.device().cc_major << p.device().cc_minor << "\n";
  const int family = registry::find_family(p.family());
  s << "family: " << p.family();
  if (family >= 0) s << " (" << registry::to_string(registry::families()[family].arch) << ")";
  s << "\nstrategy: " << to_string(p.strategy()) << "\n";
  if (p.decode_via_prefill()) {
    const plan::PrefillGeometry g = plan::prefill_geometry(p.prefill(), p.block_m(), p.packed_queries());
    s << "served as: chunked prefill over the cache, q_len " << p.decode().q_len << " queries per sequence; "
      << g.m_blocks << " tile(s) per " << (g.packed_queries > 0 ? "KV head" : "query head") << "\n";
  } else if (p.kind() == Plan::Kind::kDecode) {
    const plan::DecodeGeometry g = plan::decode_geometry(p.decode(), p.block_m());
    s << "rows: " << g.rows_per_kv << " packed query rows per KV head (q_len " << p.decode().q_len << " x group "
      << g.group << ") in " << g.m_tiles << " tile(s) of " << g.block_m << "\n";
  } else {
    const plan::PrefillGeometry g = plan::prefill_geometry(p.prefill(), p.block_m(), p.packed_queries());
    if (g.packed_queries > 0) {
      s << "rows: " << g.m_blocks << " tile(s) per KV head, each the GQA group's " << g.group << " query heads x "
        << g.packed_queries << " queries (GQA packing)\n";
    } else {
      s << "rows: " << g.m_blocks << " query block(s) of " << g.block_m << " per head; GQA group " << g.group << "\n";
    }
  }
  s << "splits: " << p.num_splits();
  if (p.split_tokens() > 0) s << " (fixed " << p.split_tokens() << " tokens each, batch-invariant)";
  s << "  -- " << p.note() << "\n";
  if (p.kind() == Plan::Kind::kDecode && p.num_splits() > 1 && !p.decode_via_prefill()) {
    s << "combine: "
      << (p.cluster_combine() ? "in-kernel, across the thread-block cluster"
          : p.fused_combine() ? "in-kernel, by each tile's last split block (prepare_workspace once)"
          : p.atomic_combine() ? "atomic adds into fp32 rows around the reference LSE, then a normalization kernel "
                               "(nondeterministic; prepare_workspace once)"
                            : "combine kernel")
      << "\n";
  }
  s << "tile: block_m=" << p.block_m() << " block_n=" << p.block_n() << " warps=" << p.warps()
    << " stages=" << p.stages() << " smem=" << p.smem_bytes() << " B, " << p.blocks_per_sm() << " block(s)/SM";
  if (p.launch_smem_bytes() > 0) s << " (launched with " << p.launch_smem_bytes() << " B: even placement)";
  if (p.register_bound_blocks() > 0) s << " (variants instance register-bound for " << p.register_bound_blocks() << ")";
  if (p.short_twin_warps() > 0) s << " (variants instance's short-block twin)";
  s << "\n";
  s << "grid: " << p.grid()[0] << " x " << p.grid()[1] << " x " << p.grid()[2] << " (work units before splitting: "
    << p.work_units() << ")\n";
  if (p.persistent_blocks() > 0) {
    s << "persistent: " << p.persistent_blocks() << " blocks walk the grid's tiles, "
      << (p.dynamic_tiles() ? "claiming each next tile from a counter in the workspace" : "in a fixed stride");
    if (p.stream_k()) s << " up to tile " << p.stream_k_first_tile() << ", then a stream-K tail of equal key-step ranges";
    if (p.mixed_beside_blocks() > 0) {
      s << "; " << p.mixed_beside_blocks() << " of them where the step has decode rows (the rest leave their SMs to the decode parts)";
    }
    s << "\n";
  }
  s << "workspace: " << p.workspace_bytes() << " bytes\n";
  return s.str;
}

}  // namespace splitkv
