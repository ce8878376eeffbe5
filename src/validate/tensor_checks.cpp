#include "validate/tensor_checks.hpp"

#include <algorithm>
#include <limits>

#include "common/formats.hpp"

namespace splitkv::detail {

std::string str(int64_t v) { return std::to_string(v); }

bool known(DType dtype) { return int(dtype) >= int(DType::kF16) && int(dtype) <= int(DType::kI64); }
bool known(KvFormat format) { return int(format) >= int(KvFormat::kNative) && int(format) <= int(KvFormat::kK8V4Kc); }

std::string name_of(DType dtype) { return known(dtype) ? to_string(dtype) : "value " + str(int(dtype)); }

Status check_tensor(const std::string& name, const TensorRef& t, const Expect& e) {
  if (t.data == nullptr) return Status::invalid(name + ".data", "a non-null pointer", "nullptr");
  if (t.dtype != e.dtype) return Status::invalid(name + ".dtype", to_string(e.dtype), name_of(t.dtype));
  const int rank = static_cast<int>(e.shape.size());
  if (t.rank != rank) {
    return Status::invalid(name + ".rank", str(rank) + " (strides must match shape)", str(t.rank));
  }
  for (int i = 0; i < rank; ++i) {
    const std::string dim = name + ".shape[" + str(i) + "]";
    const int64_t want = e.shape[i];
    if (want == kAnySize) {
      if (t.shape[i] < 1) return Status::invalid(dim, ">= 1", str(t.shape[i]));
    } else if (want < kAnySize) {
      if (t.shape[i] < -want) return Status::invalid(dim, ">= " + str(-want), str(t.shape[i]));
    } else if (t.shape[i] != want) {
      return Status::invalid(dim, str(want), str(t.shape[i]));
    }
    if (t.stride[i] < 0) {
      return Status::invalid(name + ".stride[" + str(i) + "]", ">= 0", str(t.stride[i]));
    }
  }
  const std::string last = name + ".stride[" + str(rank - 1) + "]";
  if (e.contiguous_last && t.stride[rank - 1] != 1 && t.shape[rank - 1] > 1) {
    return Status::invalid(last, "1 (the last dimension must be contiguous)", str(t.stride[rank - 1]));
  }
  const int bits = element_traits(e.dtype).bits;
  const int align = e.vector_access ? 16 : (bits + 7) / 8;
  if (reinterpret_cast<uintptr_t>(t.data) % align != 0) {
    return Status::invalid(name + ".data", str(align) + "-byte aligned address",
                           "an address misaligned by " +
                               str(reinterpret_cast<uintptr_t>(t.data) % align) + " bytes");
  }
  if (e.vector_access) {
    const int64_t vec = elements_per_16_bytes(e.dtype);
    for (int i = 0; i < rank - 1; ++i) {
      if (t.stride[i] % vec != 0) {
        return Status::invalid(name + ".stride[" + str(i) + "]",
                               "a multiple of " + str(vec) + " elements (16-byte aligned rows)",
                               str(t.stride[i]));
      }
    }
  }
  return Status::success();
}


Status check_no_aliasing(const std::string& name, const TensorRef& t) {
  int dims[8];
  int n = 0;
  for (int i = 0; i < t.rank && i < 8; ++i) {
    if (t.shape[i] > 1) dims[n++] = i;
  }
  std::stable_sort(dims, dims + n, [&](int a, int b) { return t.stride[a] < t.stride[b]; });
  int64_t span = 1;  // elements covered by the dimensions taken so far
  for (int j = 0; j < n; ++j) {
    const int i = dims[j];
    if (t.stride[i] < span) {
      return Status::invalid(name + ".stride[" + str(i) + "]",
                             ">= " + str(span) + " (an output's elements must not overlap: each index its own element)",
                             str(t.stride[i]));
    }
    span = t.stride[i] * (t.shape[i] - 1) + span;
  }
  return Status::success();
}

Status check_kv_scale_tensor(const std::string& name, const TensorRef& s, KvScales kind, const char* format_name,
                    const TensorRef& cache, int64_t num_kv_heads) {
  switch (kind) {
    case KvScales::kNone:
      if (s.empty()) return Status::success();
      return Status::invalid(name, std::string("empty for a ") + format_name + " cache (kv_format holds no scales)",
                             "a tensor");
    case KvScales::kPerHead: {
      if (Status st = check_tensor(name, s, Expect{DType::kF32, {num_kv_heads}, false, false}); !st) return st;
      // The decode kernels index the scales in 32 bits (stage_fp8_head_scales).
      const int64_t max_stride = num_kv_heads > 1 ? std::numeric_limits<int32_t>::max() / (num_kv_heads - 1) : 0;
      if (num_kv_heads > 1 && s.stride[0] > max_stride) {
        return Status::invalid(name + ".stride[0]",
                               "<= " + str(max_stride) + " (the last head's scale within 2^31 elements of the first)",
                               str(s.stride[0]));
      }
      return Status::success();
    }
    case KvScales::kPerTokenPair:
      // [blocks, Hkv, slots, 2] with the blocks and slots of the cache; each pair written as one 4-byte word.
      if (Status st = check_tensor(name, s, Expect{DType::kF16, {cache.shape[0], num_kv_heads, cache.shape[1], 2},
                                                   false, true});
          !st) {
        return st;
      }
      if (reinterpret_cast<uintptr_t>(s.data) % 4 != 0) {
        return Status::invalid(name + ".data", "a 4-byte aligned address (fp16 pairs)", "a misaligned address");
      }
      for (int d = 0; d < 3; ++d) {
        if (s.stride[d] % 2 != 0) {
          return Status::invalid(name + ".stride[" + str(d) + "]", "an even stride (whole fp16 pairs)",
                                 str(s.stride[d]));
        }
      }
      return Status::success();
    case KvScales::kPerChannelGroup: {
      // [blocks, Hkv, groups of kKeyGroup slots, 2 * D]: scale[D] then min[D] per group, D contiguous.
      const int64_t groups = (cache.shape[1] + kKeyGroup - 1) / kKeyGroup;
      return check_tensor(name, s, Expect{DType::kF16, {cache.shape[0], num_kv_heads, groups, 2 * cache.shape[3]},
                                          false, true});
    }
  }
  return Status::success();
}

}  // namespace splitkv::detail
