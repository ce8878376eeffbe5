#include "validate/validate.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "validate/tensor_checks.hpp"
#include "common/block_table.hpp"
#include "common/formats.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv::detail {
namespace {

// The Q/O type: fp16 or bf16. Quantized KV caches are chosen by kv_format, not here.
Status check_qo_dtype(DType dtype) {
  if (!known(dtype) || !element_traits(dtype).qo_type) {
    return Status::invalid("dtype", "fp16 or bf16 (the Q/O type; a quantized KV cache is set by kv_format)",
                           name_of(dtype));
  }
  return Status::success();
}

Status check_kv_format(KvFormat format, DType dtype) {
  if (!known(format)) return Status::invalid("kv_format", "a KvFormat value", "value " + str(int(format)));
  const KvFormat resolved = resolve_kv_format(format, dtype);
  const KvFormatTraits traits = kv_format_traits(resolved);
  if (!traits.implemented) {
    return Status::unsupported("kv_format", std::string(traits.name) +
                                                " caches are not implemented yet (native, fp16 and bf16 are)");
  }
  if (!traits.quantized && traits.k_element != dtype) {
    return Status::unsupported("kv_format", std::string("a 16-bit cache must hold the Q/O dtype (") +
                                                to_string(dtype) + "), got " + traits.name);
  }
  return Status::success();
}

// Element types of the K and V tensors of a problem.
DType k_element(KvFormat format, DType dtype) { return kv_format_traits(resolve_kv_format(format, dtype)).k_element; }
DType v_element(KvFormat format, DType dtype) { return kv_format_traits(resolve_kv_format(format, dtype)).v_element; }

Status check_head_dim(int head_dim) {
  if (head_dim == 64 || head_dim == 128 || head_dim == 256) return Status::success();
  return Status::unsupported("head_dim", "expected one of {64, 128, 256}, got " + str(head_dim));
}

// A bound far above any GPU's SM count that keeps the planner's products of SMs, blocks per SM and
// splits inside int.
constexpr int kMaxSmCount = 1 << 16;

// Sequence lengths (and every bound on them) stay below 2^30, so that the kernels' int arithmetic
// on key positions (a length plus a split count or a block, a split's start plus its chunk) cannot
// overflow for any length a plan accepts.
constexpr int kMaxLength = 1 << 30;

Status check_length_bound(const char* name, int value, int min) {
  if (value < min || value > kMaxLength) {
    return Status::invalid(name, str(min) + ".." + str(kMaxLength), str(value));
  }
  return Status::success();
}

Status check_positive(const char* name, int64_t value) {
  if (value < 1) return Status::invalid(name, ">= 1", str(value));
  return Status::success();
}

// The kernels fold the scale into exponents of raw-score maxima, which needs scale >= 0.
Status check_scale(float scale) {
  if (!std::isfinite(scale) || scale < 0.f) {
    return Status::invalid("softmax_scale", "a positive finite value (0 for 1/sqrt(head_dim))",
                           std::to_string(scale));
  }
  return Status::success();
}

Status check_heads(int num_q_heads, int num_kv_heads) {
  if (Status s = check_positive("num_q_heads", num_q_heads); !s) return s;
  if (Status s = check_positive("num_kv_heads", num_kv_heads); !s) return s;
  if (num_q_heads % num_kv_heads != 0) {
    return Status::invalid("num_q_heads", "a multiple of num_kv_heads (" + str(num_kv_heads) + ")",
                           str(num_q_heads));
  }
  return Status::success();
}

Status check_optional_lse(const TensorRef& lse, std::vector<int64_t> shape) {
  if (lse.empty()) return Status::success();
  if (Status s = check_tensor("lse", lse, Expect{DType::kF32, std::move(shape), false, false}); !s) return s;
  return check_no_aliasing("lse", lse);
}

// The output O: its checks, and no two rows writing one element.
Status check_out(const TensorRef& out, const Expect& e) {
  if (Status s = check_tensor("out", out, e); !s) return s;
  return check_no_aliasing("out", out);
}

// The attention variants' scalars (docs/VARIANTS.md): window sides -1 or >= 0 (a causal row stops
// at its query, so its right side is -1 or 0), a finite non-negative softcap.
Status check_variants(int window_left, int window_right, float softcap, bool causal) {
  if (window_left < -1) return Status::invalid("window_left", "-1 (unbounded) or >= 0 keys", str(window_left));
  if (window_right < -1) return Status::invalid("window_right", "-1 (unbounded) or >= 0 keys", str(window_right));
  if (causal && window_right > 0) {
    return Status::invalid("window_right", "-1 or 0 with causal (a causal query sees no later key)",
                           str(window_right));
  }
  if (!std::isfinite(softcap) || softcap < 0.f) {
    return Status::invalid("softcap", "0 (off) or a positive finite cap", std::to_string(softcap));
  }
  return Status::success();
}

// problem.sinks: a float32 logit per query head, any stride; no sinks: no tensor.
Status check_sinks(bool sinks, const TensorRef& t, int64_t num_q_heads) {
  if (!sinks) {
    if (t.empty()) return Status::success();
    return Status::invalid("sinks", "empty when problem.sinks is false", "a tensor");
  }
  return check_tensor("sinks", t, Expect{DType::kF32, {num_q_heads}, false, false});
}

}  // namespace

Status validate_decode_problem(const DecodeProblem& p) {
  if (Status s = check_positive("batch", p.batch); !s) return s;
  if (Status s = check_heads(p.num_q_heads, p.num_kv_heads); !s) return s;
  if (Status s = check_qo_dtype(p.dtype); !s) return s;
  if (Status s = check_kv_format(p.kv_format, p.dtype); !s) return s;
  if (Status s = check_head_dim(p.head_dim); !s) return s;
  if (p.q_len < 1 || p.q_len > 16) return Status::invalid("q_len", "1..16", str(p.q_len));
  if (Status s = check_length_bound("max_kv_len", p.max_kv_len, 0); !s) return s;
  if (p.page_size != 0 && (p.page_size < 16 || p.page_size % 16 != 0 || p.page_size > kMaxLength)) {
    return Status::invalid("page_size", "0 (contiguous KV) or a multiple of 16", str(p.page_size));
  }
  if (Status s = check_variants(p.window_left, p.window_right, p.softcap, p.causal); !s) return s;
  return check_scale(p.softmax_scale);
}

Status validate_device_info(const DeviceInfo& d) {
  if (d.sm_count < 1 || d.sm_count > kMaxSmCount) {
    return Status::invalid("device.sm_count", "1.." + str(kMaxSmCount) + " (query_device fills it)", str(d.sm_count));
  }
  if (d.smem_per_sm_bytes < 1) return Status::invalid("device.smem_per_sm_bytes", ">= 1", str(d.smem_per_sm_bytes));
  if (d.smem_per_block_bytes < 1 || d.smem_per_block_bytes > d.smem_per_sm_bytes) {
    return Status::invalid("device.smem_per_block_bytes",
                           "1..smem_per_sm_bytes (" + str(d.smem_per_sm_bytes) + ")", str(d.smem_per_block_bytes));
  }
  if (d.l2_bytes < 0) return Status::invalid("device.l2_bytes", ">= 0", str(d.l2_bytes));
  // An older real card is a valid description: the families say they do not run there (kUnsupported).
  if (d.cc_major < 1 || d.cc_minor < 0 || d.cc_minor > 9) {
    return Status::invalid("device.cc_major", "a compute capability major.minor (major >= 1, minor 0..9)",
                           str(d.cc_major) + "." + str(d.cc_minor));
  }
  return Status::success();
}

int64_t decode_kv_capacity(const DecodeProblem& p, const DecodeTensors& t) {
  if (p.page_size == 0) return t.k.shape[1];
  return t.block_table.shape[1] * p.page_size;
}

namespace {

// A KV cache in the decode layouts with its lengths and block table: what decode and chunked
// prefill (PrefillProblem::kv_cache) read, checked by one function.
struct CacheBinding {
  int64_t batch, num_kv_heads, head_dim;
  int page_size, max_kv_len;
  DType dtype;
  KvFormat kv_format;
  const TensorRef &k, &v, &k_scales, &v_scales, &seq_lens, &block_table;
  const int32_t* seq_lens_host;
  const int32_t* block_table_host;
  const TensorRef &k_tail, &tail_slots;
};

Status check_kv_cache(const CacheBinding& c) {
  const int64_t B = c.batch, Hkv = c.num_kv_heads, D = c.head_dim;
  const bool paged = c.page_size != 0;
  const std::vector<int64_t> kv_shape =
      paged ? std::vector<int64_t>{kAnySize, c.page_size, Hkv, D}
            : std::vector<int64_t>{B, -std::max<int64_t>(c.max_kv_len, 1), Hkv, D};
  if (Status s = check_tensor("k", c.k, Expect{k_element(c.kv_format, c.dtype), kv_shape}); !s) return s;
  std::vector<int64_t> v_shape(c.k.shape.begin(), c.k.shape.begin() + 4);
  if (Status s = check_tensor("v", c.v, Expect{v_element(c.kv_format, c.dtype), v_shape}); !s) return s;
  // Scales of a quantized cache (docs/KV_FORMATS.md); none for a 16-bit one.
  const KvFormatTraits f = kv_format_traits(resolve_kv_format(c.kv_format, c.dtype));
  if (f.channel_keys && paged && c.page_size % kKeyGroup != 0) {
    return Status::invalid("page_size", "a multiple of " + str(kKeyGroup) + " for a " + f.name +
                                            " cache (a key group never spans pages)",
                           str(c.page_size));
  }
  if (Status s = check_kv_scale_tensor("k_scales", c.k_scales, f.k_scales(), f.name, c.k, Hkv); !s) return s;
  if (Status s = check_kv_scale_tensor("v_scales", c.v_scales, f.scales, f.name, c.k, Hkv); !s) return s;
  if (Status s = check_tensor("seq_lens", c.seq_lens, Expect{DType::kI32, {B}, false, true}); !s) return s;
  if (!f.channel_keys) {
    for (const auto& [name, tensor] : {std::pair<const char*, const TensorRef*>{"k_tail", &c.k_tail},
                                       {"tail_slots", &c.tail_slots}}) {
      if (!tensor->empty()) {
        return Status::invalid(name, std::string("empty for a ") + f.name + " cache (only *_kc caches have tails)",
                               "a tensor");
      }
    }
  } else {
    // The tail: the newest two key groups of each sequence, 16-bit, [tail slots, Hkv, kKeyTailRows, D].
    if (Status s = check_tensor("k_tail", c.k_tail, Expect{c.dtype, {kAnySize, Hkv, kKeyTailRows, D}}); !s) return s;
    if (c.tail_slots.empty()) {
      if (c.k_tail.shape[0] < B) {
        return Status::invalid("k_tail.shape[0]", ">= batch (" + str(B) + ": sequence b's tail is row b without "
                                                  "tail_slots)", str(c.k_tail.shape[0]));
      }
    } else if (Status s = check_tensor("tail_slots", c.tail_slots, Expect{DType::kI32, {B}, false, false}); !s) {
      return s;
    }
  }
  if (paged) {
    const int64_t min_pages = block_table_pages(c.max_kv_len, c.page_size);
    if (Status s = check_tensor("block_table", c.block_table, Expect{DType::kI32, {B, -min_pages}, false, true});
        !s) {
      return s;
    }
  } else if (!c.block_table.empty()) {
    return Status::invalid("block_table", "empty for contiguous KV (page_size == 0)",
                           "a tensor; set problem.page_size for paged KV");
  }
  if (c.seq_lens_host != nullptr) {
    for (int64_t b = 0; b < B; ++b) {
      const int32_t len = c.seq_lens_host[b];
      if (len < 0 || len > c.max_kv_len) {
        return Status::invalid("seq_lens[" + str(b) + "]", "a length in [0, max_kv_len=" + str(c.max_kv_len) + "]",
                               str(len));
      }
    }
  }
  if (paged && c.block_table_host != nullptr) {
    const int64_t num_pages = c.k.shape[0];
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = c.seq_lens_host ? c.seq_lens_host[b] : c.max_kv_len;
      const int64_t pages_used = (len + c.page_size - 1) / c.page_size;
      for (int64_t j = 0; j < pages_used; ++j) {
        const int32_t page = c.block_table_host[b * c.block_table.stride[0] + j];
        if (page < 0 || page >= num_pages) {
          return Status::invalid("block_table[" + str(b) + "][" + str(j) + "]",
                                 "a page id in [0, " + str(num_pages) + ")", str(page));
        }
      }
    }
  }
  return Status::success();
}

}  // namespace

Status validate_decode_tensors(const DecodeProblem& p, const DecodeTensors& t) {
  const int64_t B = p.batch, Lq = p.q_len, Hq = p.num_q_heads, D = p.head_dim;
  if (Status s = check_tensor("q", t.q, Expect{p.dtype, {B, Lq, Hq, D}}); !s) return s;
  const CacheBinding cache{B, p.num_kv_heads, D, p.page_size, p.max_kv_len, p.dtype, p.kv_format, t.k, t.v,
                           t.k_scales, t.v_scales, t.seq_lens, t.block_table, t.seq_lens_host, t.block_table_host,
                           t.k_tail, t.tail_slots};
  if (Status s = check_kv_cache(cache); !s) return s;
  if (!t.keys_after.empty()) {
    if (Status s = check_tensor("keys_after", t.keys_after, Expect{DType::kI32, {B}, false, true}); !s) return s;
  }
  if (t.partial_o.empty() != t.partial_lse.empty()) {
    const char* missing = t.partial_o.empty() ? "partial_o" : "partial_lse";
    return Status::invalid(missing, "given together with the other partial tensor", "empty");
  }
  if (Status s = check_sinks(p.sinks, t.sinks, Hq); !s) return s;
  if (p.sinks && !t.partial_o.empty()) {
    return Status::invalid("sinks", "off with partial_o (a sink enters once, at the final merge: pass it to "
                                    "run_combine)", "on");
  }
  if (!p.tree_mask && !t.tree_mask.empty()) {
    return Status::invalid("tree_mask", "empty when problem.tree_mask is false", "a tensor");
  }
  if (p.tree_mask) {
    const int64_t row_bytes = (Lq + 7) / 8;
    if (Status s = check_tensor("tree_mask", t.tree_mask, Expect{DType::kI8, {B, Lq, row_bytes}, false, true}); !s) {
      return s;
    }
    if (!t.keys_after.empty()) {
      return Status::invalid("tree_mask", "off with keys_after (the drafts are the context's last keys: mask them "
                                          "in the shard that ends the context, without keys_after)", "on");
    }
  }
  if (!t.partial_o.empty()) {  // shapes against the plan's split count: validate_decode_partials
    if (!t.out.empty()) return Status::invalid("out", "empty when partial_o receives the partials", "a tensor");
    if (!t.lse.empty()) return Status::invalid("lse", "empty when partial_lse receives the LSEs", "a tensor");
    return Status::success();
  }
  if (Status s = check_out(t.out, Expect{p.dtype, {B, Lq, Hq, D}}); !s) return s;
  return check_optional_lse(t.lse, {B, Hq, Lq});
}

Status validate_prefill_problem(const PrefillProblem& p) {
  if (Status s = check_positive("batch", p.batch); !s) return s;
  if (Status s = check_heads(p.num_q_heads, p.num_kv_heads); !s) return s;
  if (Status s = check_qo_dtype(p.dtype); !s) return s;
  if (Status s = check_kv_format(p.kv_format, p.dtype); !s) return s;
  if (Status s = check_head_dim(p.head_dim); !s) return s;
  if (Status s = check_length_bound("max_q_len", p.max_q_len, 1); !s) return s;
  if (Status s = check_length_bound("max_kv_len", p.max_kv_len, 0); !s) return s;
  if (Status s = check_variants(p.window_left, p.window_right, p.softcap, p.causal); !s) return s;
  if (p.kv_cache) {  // keys from a decode cache: its page rule; lengths come from seq_lens (0 allowed)
    if (p.page_size != 0 && (p.page_size < 16 || p.page_size % 16 != 0 || p.page_size > kMaxLength)) {
      return Status::invalid("page_size", "0 (contiguous KV cache) or a multiple of 16", str(p.page_size));
    }
    return check_scale(p.softmax_scale);
  }
  if (p.page_size != 0) {
    return Status::invalid("page_size", "0 unless kv_cache (K/V token tensors have no pages)", str(p.page_size));
  }
  if (const KvFormatTraits f = kv_format_traits(resolve_kv_format(p.kv_format, p.dtype)); f.quantized) {
    return Status::unsupported("kv_format", std::string(f.name) + " K/V are read from a KV cache only: set kv_cache "
                                            "(chunked prefill) with the cache in the decode layouts");
  }
  if (!p.varlen && p.max_kv_len < 1) {
    return Status::invalid("max_kv_len", ">= 1 for padded batches", str(p.max_kv_len));
  }
  return check_scale(p.softmax_scale);
}

namespace {

Status check_cu_seqlens_host(const char* name, const int32_t* cu, int batch, int64_t total,
                             int max_len) {
  if (cu == nullptr) return Status::success();
  if (cu[0] < 0) return Status::invalid(std::string(name) + "[0]", ">= 0", str(cu[0]));
  for (int b = 0; b < batch; ++b) {
    const int64_t len = int64_t(cu[b + 1]) - cu[b];
    const std::string arg = std::string(name) + "[" + str(b + 1) + "]";
    if (len < 0) {
      return Status::invalid(arg, "non-decreasing offsets (>= " + str(cu[b]) + ")", str(cu[b + 1]));
    }
    if (len > max_len) {
      return Status::invalid(arg, "a sequence length <= " + str(max_len) + " (the problem's bound)",
                             "length " + str(len));
    }
  }
  if (cu[batch] > total) {
    return Status::invalid(std::string(name) + "[" + str(batch) + "]",
                           "<= " + str(total) + " (tokens in the tensor)", str(cu[batch]));
  }
  return Status::success();
}

}  // namespace

namespace {

// The keys of a prefill: K/V token tensors (padded [B, Lk, Hkv, D] or varlen [total_k, Hkv, D]),
// or a decode cache (kv_cache: chunked prefill).
Status check_prefill_keys(const PrefillProblem& p, const PrefillTensors& t) {
  const int64_t B = p.batch, Hkv = p.num_kv_heads, D = p.head_dim;
  if (p.kv_cache) {
    return check_kv_cache(CacheBinding{B, Hkv, D, p.page_size, p.max_kv_len, p.dtype, p.kv_format, t.k, t.v,
                                       t.k_scales, t.v_scales, t.seq_lens, t.block_table, t.seq_lens_host,
                                       t.block_table_host, t.k_tail, t.tail_slots});
  }
  const DType k_type = k_element(p.kv_format, p.dtype), v_type = v_element(p.kv_format, p.dtype);
  if (!p.varlen) {
    const int64_t Lk = p.max_kv_len;
    if (Status s = check_tensor("k", t.k, Expect{k_type, {B, Lk, Hkv, D}}); !s) return s;
    return check_tensor("v", t.v, Expect{v_type, {B, Lk, Hkv, D}});
  }
  if (Status s = check_tensor("k", t.k, Expect{k_type, {kAnySize, Hkv, D}}); !s) return s;
  return check_tensor("v", t.v, Expect{v_type, {t.k.shape[0], Hkv, D}});
}

}  // namespace

Status validate_prefill_tensors(const PrefillProblem& p, const PrefillTensors& t) {
  if (p.kv_cache) {
    if (!t.cu_seqlens_k.empty() || t.cu_seqlens_k_host != nullptr) {
      return Status::invalid("cu_seqlens_k", "empty with kv_cache (key counts come from seq_lens)", "a tensor");
    }
  } else {
    for (const auto& [name, tensor] : {std::pair<const char*, const TensorRef*>{"seq_lens", &t.seq_lens},
                                       {"block_table", &t.block_table},
                                       {"k_scales", &t.k_scales},
                                       {"v_scales", &t.v_scales},
                                       {"k_tail", &t.k_tail},
                                       {"tail_slots", &t.tail_slots}}) {
      if (!tensor->empty()) {
        return Status::invalid(name, "empty unless kv_cache (K/V token tensors carry their own lengths)", "a tensor");
      }
    }
  }
  const int64_t B = p.batch, Hq = p.num_q_heads, D = p.head_dim;
  if (Status s = check_sinks(p.sinks, t.sinks, Hq); !s) return s;
  if (!p.varlen) {
    const int64_t Lq = p.max_q_len;
    if (Status s = check_tensor("q", t.q, Expect{p.dtype, {B, Lq, Hq, D}}); !s) return s;
    if (Status s = check_prefill_keys(p, t); !s) return s;
    if (Status s = check_out(t.out, Expect{p.dtype, {B, Lq, Hq, D}}); !s) return s;
    if (!t.cu_seqlens_q.empty() || !t.cu_seqlens_k.empty()) {
      return Status::invalid("cu_seqlens_q", "empty for padded batches (varlen == false)", "a tensor");
    }
    return check_optional_lse(t.lse, {B, Hq, Lq});
  }
  if (Status s = check_tensor("q", t.q, Expect{p.dtype, {kAnySize, Hq, D}}); !s) return s;
  if (Status s = check_prefill_keys(p, t); !s) return s;
  if (Status s = check_out(t.out, Expect{p.dtype, {t.q.shape[0], Hq, D}}); !s) return s;
  if (Status s = check_tensor("cu_seqlens_q", t.cu_seqlens_q, Expect{DType::kI32, {B + 1}, false, true});
      !s) {
    return s;
  }
  if (!p.kv_cache) {
    if (Status s = check_tensor("cu_seqlens_k", t.cu_seqlens_k, Expect{DType::kI32, {B + 1}, false, true}); !s) {
      return s;
    }
  }
  if (Status s = check_optional_lse(t.lse, {Hq, t.q.shape[0]}); !s) return s;
  if (Status s = check_cu_seqlens_host("cu_seqlens_q", t.cu_seqlens_q_host, p.batch, t.q.shape[0],
                                       p.max_q_len);
      !s) {
    return s;
  }
  if (p.kv_cache) return Status::success();  // key counts: seq_lens, checked with the cache
  return check_cu_seqlens_host("cu_seqlens_k", t.cu_seqlens_k_host, p.batch, t.k.shape[0],
                               p.max_kv_len);
}

namespace {

// The partials of run_combine are addressed as dense rows: every stride must be row-major.
Status check_row_major(const std::string& name, const TensorRef& t) {
  int64_t expected = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.shape[i] > 1 && t.stride[i] != expected) {
      return Status::invalid(name + ".stride[" + str(i) + "]", str(expected) + " (partials must be contiguous)",
                             str(t.stride[i]));
    }
    expected *= t.shape[i];
  }
  return Status::success();
}

}  // namespace

Status validate_workspace(size_t required, const void* workspace, size_t workspace_bytes) {
  if (required == 0) return Status::success();
  if (workspace == nullptr) {
    return Status::invalid("workspace", "a device buffer of " + std::to_string(required) + " bytes", "nullptr");
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    return Status::invalid("workspace", "a 16-byte aligned address", "a misaligned address");
  }
  if (workspace_bytes < required) {
    return Status(StatusCode::kWorkspaceTooSmall, "workspace_bytes",
                  "expected >= " + std::to_string(required) + " (plan.workspace_bytes), got " +
                      std::to_string(workspace_bytes));
  }
  return Status::success();
}

Status validate_decode_partials(const DecodeProblem& p, int num_splits, const DecodeTensors& t) {
  if (t.partial_o.empty()) return Status::success();
  const int64_t S = num_splits, rows = int64_t(p.batch) * p.q_len, H = p.num_q_heads, D = p.head_dim;
  if (Status s = check_tensor("partial_o", t.partial_o, Expect{DType::kF32, {S, rows, H, D}}); !s) return s;
  if (Status s = check_row_major("partial_o", t.partial_o); !s) return s;
  if (Status s = check_tensor("partial_lse", t.partial_lse, Expect{DType::kF32, {S, rows, H}, false, true}); !s) {
    return s;
  }
  return check_row_major("partial_lse", t.partial_lse);
}

Status validate_combine(const CombineProblem& p, const CombineTensors& t) {
  if (Status s = check_positive("num_splits", p.num_splits); !s) return s;
  if (Status s = check_positive("batch", p.batch); !s) return s;
  if (Status s = check_positive("seq_len", p.seq_len); !s) return s;
  if (Status s = check_positive("num_heads", p.num_heads); !s) return s;
  if (Status s = check_qo_dtype(p.dtype); !s) return s;
  if (Status s = check_head_dim(p.head_dim); !s) return s;
  const int64_t S = p.num_splits, rows = int64_t(p.batch) * p.seq_len, H = p.num_heads, D = p.head_dim;
  if (Status s = check_tensor("partial_o", t.partial_o, Expect{DType::kF32, {S, rows, H, D}}); !s) return s;
  if (Status s = check_row_major("partial_o", t.partial_o); !s) return s;
  if (Status s = check_tensor("partial_lse", t.partial_lse, Expect{DType::kF32, {S, rows, H}, false, true}); !s) {
    return s;
  }
  if (Status s = check_row_major("partial_lse", t.partial_lse); !s) return s;
  if (Status s = check_out(t.out, Expect{p.dtype, {p.batch, p.seq_len, H, D}}); !s) return s;
  if (Status s = check_sinks(p.sinks, t.sinks, H); !s) return s;
  return check_optional_lse(t.lse, {p.batch, H, p.seq_len});
}

}  // namespace splitkv::detail
