// run_append_kv: validate every argument (errors name it), fill the kernel's parameters, launch.
// No allocation, no synchronization, no read of device memory: capturable in a CUDA graph.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "api/device_arch.hpp"
#include "api/kv_view.hpp"
#include "validate/tensor_checks.hpp"
#include "common/formats.hpp"
#include "kernels/quant/append_kv_params.hpp"
#include "launch/dispatch.hpp"
#include "quant/kv_quant_host.hpp"
#include "splitkv/append_kv.hpp"

namespace splitkv {
namespace {

using detail::CodeKind;
using detail::AppendSideParams;
using detail::KvFormatTraits;
using detail::Expect;
using detail::check_tensor;
using detail::kAnySize;
using detail::kKeyGroup;
using detail::kKeyTailRows;
using detail::known;
using detail::name_of;
using detail::str;

Status validate_problem(const AppendKvProblem& p) {
  if (p.num_tokens < 0) return Status::invalid("num_tokens", ">= 0", str(p.num_tokens));
  if (p.num_kv_heads < 1) return Status::invalid("num_kv_heads", ">= 1", str(p.num_kv_heads));
  if (!known(p.dtype) || !detail::element_traits(p.dtype).qo_type) {
    return Status::invalid("dtype", "fp16 or bf16 (the type of the new k / v rows; the cache format is set by kv_format)",
                           name_of(p.dtype));
  }
  if (!known(p.kv_format)) return Status::invalid("kv_format", "a KvFormat value", "value " + str(int(p.kv_format)));
  // Every format is written here, including those no attention kernel reads yet.
  const KvFormat format = detail::resolve_kv_format(p.kv_format, p.dtype);
  const KvFormatTraits traits = detail::kv_format_traits(format);
  if (!traits.quantized && traits.k_element != p.dtype) {
    return Status::unsupported("kv_format", std::string("a 16-bit cache must hold the dtype of the new rows (") +
                                                to_string(p.dtype) + "), got " + traits.name);
  }
  // An odd head dim with an INT4 side is invalid (the host rule); others outside {64, 128, 256} unsupported.
  if (Status s = quant::check_token_head_bytes(format, p.head_dim); !s) return s;
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) {
    return Status::unsupported("head_dim", "expected one of {64, 128, 256}, got " + str(p.head_dim));
  }
  if (p.page_size != 0 && (p.page_size < 16 || p.page_size % 16 != 0)) {
    return Status::invalid("page_size", "0 (contiguous cache) or a multiple of 16", str(p.page_size));
  }
  if (traits.channel_keys && p.page_size % kKeyGroup != 0) {
    return Status::invalid("page_size", "0 or a multiple of " + str(kKeyGroup) + " for a " + traits.name +
                                            " cache (a key group never spans pages)",
                           str(p.page_size));
  }
  if (traits.channel_keys && int64_t(p.num_tokens) * p.num_kv_heads > std::numeric_limits<int32_t>::max()) {
    return Status::invalid("num_tokens", "at most 2^31 - 1 (token, KV head) pairs in one launch for a *_kc cache",
                           str(p.num_tokens));
  }
  const int64_t blocks = (int64_t(p.num_tokens) * 2 * p.num_kv_heads + detail::kAppendWarpsPerBlock - 1) /
                         detail::kAppendWarpsPerBlock;
  if (blocks > std::numeric_limits<int32_t>::max()) {
    return Status::invalid("num_tokens", "at most 4 * (2^31 - 1) rows (num_tokens * 2 * num_kv_heads) in one launch",
                           str(p.num_tokens));
  }
  return Status::success();
}

// *_kc: the tail ring and where each token belongs; other formats: none of it.
Status validate_key_tail(const AppendKvProblem& p, const KvFormatTraits& f, const AppendKvTensors& t) {
  const std::pair<const char*, const TensorRef*> kc_only[] = {
      {"positions", &t.positions}, {"tail_slots", &t.tail_slots}, {"k_tail", &t.k_tail}};
  if (!f.channel_keys) {
    for (const auto& [name, tensor] : kc_only) {
      if (!tensor->empty()) {
        return Status::invalid(name, std::string("empty for a ") + f.name + " cache (only *_kc caches have tails)",
                               "a tensor");
      }
    }
    return Status::success();
  }
  const int64_t N = p.num_tokens, Hkv = p.num_kv_heads, D = p.head_dim;
  if (Status s = check_tensor("k_tail", t.k_tail, Expect{p.dtype, {kAnySize, Hkv, kKeyTailRows, D}}); !s) return s;
  if (Status s = detail::check_no_aliasing("k_tail", t.k_tail); !s) return s;
  for (const auto& [name, other] : {std::pair<const char*, const TensorRef*>{"k_cache", &t.k_cache},
                                    {"v_cache", &t.v_cache}, {"k_scales", &t.k_scales}, {"v_scales", &t.v_scales}}) {
    if (other->data == t.k_tail.data) {
      return Status::invalid("k_tail", std::string("a tensor apart from ") + name + " (both are written)",
                             std::string(name) + "'s memory");
    }
  }
  if (N == 0) return Status::success();  // positions and tail slots are not read
  const DType position_type = t.positions.dtype == DType::kI32 ? DType::kI32 : DType::kI64;
  if (Status s = check_tensor("positions", t.positions, Expect{position_type, {N}, false, false}); !s) return s;
  return check_tensor("tail_slots", t.tail_slots, Expect{DType::kI32, {N}, false, false});
}

Status validate_tensors(const AppendKvProblem& p, const AppendKvTensors& t) {
  const KvFormatTraits f = detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype));
  const int64_t N = p.num_tokens, Hkv = p.num_kv_heads, D = p.head_dim;
  const std::vector<int64_t> cache_shape =
      p.page_size != 0 ? std::vector<int64_t>{kAnySize, p.page_size, Hkv, D}
                       : std::vector<int64_t>{kAnySize, kAnySize, Hkv, D};
  if (Status s = check_tensor("k_cache", t.k_cache, Expect{f.k_element, cache_shape}); !s) return s;
  const std::vector<int64_t> v_shape(t.k_cache.shape.begin(), t.k_cache.shape.begin() + 4);
  if (Status s = check_tensor("v_cache", t.v_cache, Expect{f.v_element, v_shape}); !s) return s;
  if (Status s = detail::check_kv_scale_tensor("k_scales", t.k_scales, f.k_scales(), f.name, t.k_cache, Hkv); !s) {
    return s;
  }
  if (Status s = detail::check_kv_scale_tensor("v_scales", t.v_scales, f.scales, f.name, t.k_cache, Hkv); !s) return s;
  // What the call writes: no element twice within a tensor, and K apart from V.
  if (Status s = detail::check_no_aliasing("k_cache", t.k_cache); !s) return s;
  if (Status s = detail::check_no_aliasing("v_cache", t.v_cache); !s) return s;
  if (t.v_cache.data == t.k_cache.data) {
    return Status::invalid("v_cache", "a tensor apart from k_cache (both are written)", "k_cache's memory");
  }
  if (Status s = validate_key_tail(p, f, t); !s) return s;
  if (f.scales == detail::KvScales::kPerTokenPair) {  // (scale, min) pairs, written with the codes
    if (Status s = detail::check_no_aliasing("k_scales", t.k_scales); !s) return s;
    if (Status s = detail::check_no_aliasing("v_scales", t.v_scales); !s) return s;
    if (t.v_scales.data == t.k_scales.data) {
      return Status::invalid("v_scales", "a tensor apart from k_scales (both are written)", "k_scales' memory");
    }
  }
  if (N == 0) return Status::success();  // k, v and slots are not read
  if (Status s = check_tensor("k", t.k, Expect{p.dtype, {N, Hkv, D}}); !s) return s;
  if (Status s = check_tensor("v", t.v, Expect{p.dtype, {N, Hkv, D}}); !s) return s;
  // int64 like vLLM's slot mapping; int32 accepted too.
  const DType slot_type = t.slots.dtype == DType::kI32 ? DType::kI32 : DType::kI64;
  return check_tensor("slots", t.slots, Expect{slot_type, {N}, false, false});
}

AppendSideParams side_params(const TensorRef& src, const TensorRef& cache, const TensorRef& scales) {
  AppendSideParams s;
  s.format = detail::code_kind(cache.dtype);
  s.src = src.data;
  s.src_token_stride = src.stride[0];
  s.src_head_stride = src.stride[1];
  // Byte strides, as the decode kernels' view has them (validation made them 16-byte multiples, so
  // INT4 nibbles divide evenly).
  const detail::KvSide side = detail::cache_side(cache, /*bytes=*/true);
  s.cache = static_cast<char*>(cache.data);
  s.cache_block_stride = side.block_stride;
  s.cache_slot_stride = side.token_stride;
  s.cache_head_stride = side.head_stride;
  if (s.format == CodeKind::kFp8) {
    s.fp8_scales = static_cast<const float*>(scales.data);
    s.fp8_scale_stride = scales.stride[0];
  } else if (s.format != CodeKind::kNative16) {
    s.pairs = static_cast<uint16_t*>(scales.data);
    s.pair_block_stride = scales.stride[0];
    s.pair_head_stride = scales.stride[1];
    s.pair_slot_stride = scales.stride[2];
  }
  return s;
}

// The *_kc keys' ring and each token's place (their codes and group scales are params.k's).
detail::AppendKcParams kc_params(const AppendKvTensors& t) {
  detail::AppendKcParams kc;
  kc.enabled = true;
  kc.positions = t.positions.data;
  kc.positions_64 = t.positions.dtype == DType::kI64;
  kc.positions_stride = t.positions.stride[0];
  kc.tail_slots = static_cast<const int32_t*>(t.tail_slots.data);
  kc.tail_slots_stride = t.tail_slots.stride[0];
  kc.num_tail_slots = t.k_tail.shape[0];
  kc.tail = static_cast<char*>(t.k_tail.data);
  kc.tail_slot_stride = 2 * t.k_tail.stride[0];
  kc.tail_head_stride = 2 * t.k_tail.stride[1];
  kc.tail_row_stride = 2 * t.k_tail.stride[2];
  return kc;
}

}  // namespace

Status run_append_kv(const AppendKvProblem& p, const AppendKvTensors& t, Stream stream) {
  if (Status s = validate_problem(p); !s) return s;
  if (Status s = validate_tensors(p, t); !s) return s;
  if (p.num_tokens == 0) return Status::success();

  detail::AppendKvParams params;
  params.k = side_params(t.k, t.k_cache, t.k_scales);
  params.v = side_params(t.v, t.v_cache, t.v_scales);
  params.slots = t.slots.data;
  params.slots_64 = t.slots.dtype == DType::kI64;
  params.slots_stride = t.slots.stride[0];
  params.num_tokens = p.num_tokens;
  params.num_kv_heads = p.num_kv_heads;
  params.slots_per_block = t.k_cache.shape[1];
  params.num_slots = t.k_cache.shape[0] * t.k_cache.shape[1];
  params.dtype = p.dtype;
  params.head_dim = p.head_dim;
  if (detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype)).channel_keys) {
    params.kc = kc_params(t);
  }

  detail::LaunchConfig config;
  const int64_t rows = int64_t(p.num_tokens) * 2 * p.num_kv_heads;
  config.grid[0] = static_cast<unsigned>((rows + detail::kAppendWarpsPerBlock - 1) / detail::kAppendWarpsPerBlock);
  config.stream = stream;
  config.use_pdl = detail::current_device_supports_pdl();
  detail::Launcher launcher;
  if (Status s = detail::find_launcher("append_kv", p.dtype, p.head_dim, &launcher); !s) return s;
  const cudaError_t error = launcher(&params, config);
  if (error == cudaSuccess) return Status::success();
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    return Status(StatusCode::kNoDevice, "", "no CUDA device is available");
  }
  return Status(StatusCode::kCudaError, "", std::string("append_kv kernel launch: ") + cudaGetErrorString(error));
}

}  // namespace splitkv
