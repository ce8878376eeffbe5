// run_append_kv on the GPU against the host quantizer (src/quant/kv_quant_host.*), byte for byte:
// every format (16-bit copy, FP8, INT8, INT4, K8V4), fp16 and bf16 rows, D 64/128/256, paged
// (16 and 256, shuffled pages, partial pages) and contiguous caches, strided tensors. Caches and
// scales start as a sentinel byte pattern and the host applies the same appends to its copy, so
// comparing whole buffers checks the written bytes and that nothing else changed (slot -1, slots
// out of range, padding, a guard block past each tensor, neighbours of NaN rows). Rows include constants, signed zeros, values
// near and beyond +-65504, NaN, inf, fp16/fp32 subnormals; a sweep passes every 16-bit pattern.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/formats.hpp"
#include "common/half_convert.hpp"
#include "gpu_test_util.hpp"
#include "quant/kv_quant_host.hpp"
#include "testing/random_fill.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

#define SPLITKV_REQUIRE_DEVICE() \
  if (!::splitkv::testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped"

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- host tensors --------------------------------------------------------------------------------

// A tensor's bytes in host memory with its shape and strides (elements; padded strides leave gaps),
// followed by a guard of one more block (outer index), where a slot one past the cache would land.
struct HostTensor {
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape, stride;
  std::vector<uint8_t> bytes;
  int64_t tensor_bytes = 0;  // the tensor proper; bytes beyond it are the guard

  int bits() const { return bit_width(dtype); }
  // Row-major with `pad` extra elements in every stride but the last (0: dense).
  static HostTensor make(DType dtype, std::vector<int64_t> shape, int64_t pad, uint8_t fill) {
    HostTensor t;
    t.dtype = dtype;
    t.shape = shape;
    t.stride.assign(shape.size(), 1);
    for (int i = int(shape.size()) - 2; i >= 0; --i) t.stride[i] = shape[i + 1] * t.stride[i + 1] + pad;
    t.tensor_bytes = shape[0] * t.stride[0] * t.bits() / 8;
    t.bytes.assign(size_t(t.tensor_bytes + t.stride[0] * t.bits() / 8), fill);
    return t;
  }
  TensorRef ref(void* data) const {
    TensorRef r;
    r.data = data;
    r.dtype = dtype;
    r.rank = int(shape.size());
    for (int i = 0; i < r.rank; ++i) r.shape[i] = shape[i], r.stride[i] = stride[i];
    return r;
  }
  uint8_t* at(int64_t element) { return &bytes[size_t(element * bits() / 8)]; }
  // "[i][j]..." of the element holding byte `byte`, or "padding", or "guard".
  std::string locate(int64_t byte) const {
    if (byte >= tensor_bytes) return "guard";
    int64_t e = byte * 8 / bits();
    std::ostringstream s;
    for (size_t i = 0; i < shape.size(); ++i) {
      const int64_t c = e / stride[i];
      e %= stride[i];
      if (c >= shape[i]) return "padding";
      s << "[" << c << "]";
    }
    return s.str();
  }
};

// Pseudo-random bytes (not one repeated value), so a copy from the wrong place is seen too.
uint8_t sentinel(size_t i) { return uint8_t((i * 131 + 17) ^ (i >> 7)); }
void fill_sentinel(HostTensor& t) {
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = sentinel(i);
}

// ---- rows ------------------------------------------------------------------------------------------

enum class RowKind { kNormal, kOutliers, kShifted, kConstant, kSignedZeros, kNearFp16Max, kBeyondFp16, kNaN, kInf,
                     kTiny, kNarrowFar, kCount };
const char* kRowKindNames[] = {"normal", "outliers", "shifted", "constant", "signed zeros", "near +-65504",
                               "beyond fp16", "NaN", "inf", "tiny", "narrow far from 0"};

std::vector<float> make_row(RowKind kind, int d, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, d - 1);
  std::vector<float> x(static_cast<size_t>(d));
  const float sigma = std::vector<float>{0.01f, 1.f, 30.f}[size_t(pick(rng) % 3)];
  for (float& v : x) v = normal(rng) * sigma;
  switch (kind) {
    case RowKind::kNormal: break;
    case RowKind::kOutliers:
      for (int i = 0; i < 3; ++i) x[size_t(pick(rng))] *= 50.f;
      break;
    case RowKind::kShifted:
      for (float& v : x) v = 100.f + std::fabs(v);
      break;
    case RowKind::kConstant:
      std::fill(x.begin(), x.end(), normal(rng) * 10.f);
      break;
    case RowKind::kSignedZeros:
      for (float& v : x) v = unit(rng) < 0.5f ? -0.f : 0.f;
      break;
    case RowKind::kNearFp16Max:
      for (float& v : x) v = (unit(rng) < 0.5f ? -1.f : 1.f) * (60000.f + 5504.f * unit(rng));
      x[size_t(pick(rng))] = 65504.f;
      x[size_t(pick(rng))] = -65504.f;
      break;
    case RowKind::kBeyondFp16:  // fp16 rows hold inf here (a NaN row); bf16 rows saturate min16 / the scale
      for (float& v : x) v = (unit(rng) < 0.5f ? -1.f : 1.f) * (65504.f + 1e6f * unit(rng));
      x[size_t(pick(rng))] = unit(rng) < 0.5f ? 3e38f : -3e38f;
      break;
    case RowKind::kNaN:
      x[size_t(pick(rng))] = kNaN;
      break;
    case RowKind::kInf:
      x[size_t(pick(rng))] = unit(rng) < 0.5f ? kInf : -kInf;
      break;
    case RowKind::kTiny:  // fp16 subnormals; in bf16 also fp32 subnormals
      for (float& v : x) v = normal(rng) * (unit(rng) < 0.5f ? 1e-7f : 1e-39f);
      break;
    case RowKind::kNarrowFar:  // the minimum may round up past the maximum
      for (float& v : x) v = unit(rng) < 0.5f ? 4e-8f + 1e-8f * unit(rng) : 1000.f + 0.01f * normal(rng);
      if (unit(rng) < 0.5f) {  // in bf16: min 4e-8 rounds up to the fp16 2^-24 > max 5e-8
        std::fill(x.begin(), x.end(), 4e-8f);
        x[0] = 5e-8f;
      }
      break;
    case RowKind::kCount: break;
  }
  return x;
}

// ---- one append, on the host and on the GPU -----------------------------------------------------------

struct Layout {
  std::string name;
  int page_size = 0;              // 0: contiguous
  int64_t blocks = 0, slots_per_block = 0;
  int num_kv_heads = 2;
  bool padded = false;            // gaps in every stride of the caches, scales and new rows
  std::vector<int> start, count;  // per sequence: tokens already cached, tokens appended now
};

// The cache of one case in host memory: what the GPU's must equal byte for byte.
struct HostCache {
  HostTensor k_cache, v_cache, k_scales, v_scales;
  bool operator==(const HostCache& o) const {
    return k_cache.bytes == o.k_cache.bytes && v_cache.bytes == o.v_cache.bytes &&
           k_scales.bytes == o.k_scales.bytes && v_scales.bytes == o.v_scales.bytes;
  }
};

struct Case {
  AppendKvProblem problem;
  int64_t blocks = 0, slots_per_block = 0;
  bool padded = false;
  std::vector<float> fp8_k_scales, fp8_v_scales;  // per KV head (FP8)
  detail::KvFormatTraits traits() const {
    return detail::kv_format_traits(detail::resolve_kv_format(problem.kv_format, problem.dtype));
  }
};

HostCache make_cache(const Case& c) {
  const detail::KvFormatTraits f = c.traits();
  const int64_t hkv = c.problem.num_kv_heads, d = c.problem.head_dim;
  HostCache h;
  auto pad_for = [&](DType e) { return c.padded ? int64_t(detail::elements_per_16_bytes(e)) : 0; };
  h.k_cache = HostTensor::make(f.k_element, {c.blocks, c.slots_per_block, hkv, d}, pad_for(f.k_element), 0);
  h.v_cache = HostTensor::make(f.v_element, {c.blocks, c.slots_per_block, hkv, d}, pad_for(f.v_element), 0);
  if (f.scales == detail::KvScales::kPerHead) {
    h.k_scales = HostTensor::make(DType::kF32, {hkv}, 0, 0);
    h.v_scales = HostTensor::make(DType::kF32, {hkv}, 0, 0);
    std::memcpy(h.k_scales.bytes.data(), c.fp8_k_scales.data(), size_t(hkv) * 4);
    std::memcpy(h.v_scales.bytes.data(), c.fp8_v_scales.data(), size_t(hkv) * 4);
  } else if (f.scales == detail::KvScales::kPerTokenPair) {
    h.k_scales = HostTensor::make(DType::kF16, {c.blocks, hkv, c.slots_per_block, 2}, c.padded ? 2 : 0, 0);
    h.v_scales = HostTensor::make(DType::kF16, {c.blocks, hkv, c.slots_per_block, 2}, c.padded ? 2 : 0, 0);
  }
  fill_sentinel(h.k_cache);
  fill_sentinel(h.v_cache);
  if (f.scales == detail::KvScales::kPerTokenPair) {
    fill_sentinel(h.k_scales);
    fill_sentinel(h.v_scales);
  }
  return h;
}

// New rows [N, Hkv, D] as 16-bit bits; padded: k and v are slices of a fused [N, 2 Hkv + Hkv + Hkv, D]
// QKV tensor (query heads first), as a model's projection writes them.
struct NewRows {
  HostTensor qkv, k, v;  // k and v share qkv's bytes when fused
  int64_t k_offset = 0, v_offset = 0;  // elements into qkv
  std::vector<RowKind> kinds;          // per (token, side, head)
};

NewRows make_rows(const Case& c, std::mt19937_64& rng, const std::vector<RowKind>& kinds_to_use) {
  const int64_t n = c.problem.num_tokens, hkv = c.problem.num_kv_heads, d = c.problem.head_dim;
  const DType dt = c.problem.dtype;
  NewRows r;
  const int64_t heads = c.padded ? 4 * hkv : 2 * hkv;  // fused: Hq = 2 Hkv query heads first
  r.qkv = HostTensor::make(dt, {std::max<int64_t>(n, 1), heads, d}, c.padded ? 8 : 0, 0);
  r.k_offset = (heads - 2 * hkv) * r.qkv.stride[1];
  r.v_offset = r.k_offset + hkv * r.qkv.stride[1];
  std::uniform_int_distribution<size_t> pick(0, kinds_to_use.size() - 1);
  for (int64_t t = 0; t < n; ++t) {
    for (int side = 0; side < 2; ++side) {
      for (int64_t h = 0; h < hkv; ++h) {
        const RowKind kind = kinds_to_use[pick(rng)];
        r.kinds.push_back(kind);
        const std::vector<float> x = make_row(kind, int(d), rng);
        const int64_t base = t * r.qkv.stride[0] + (side ? r.v_offset : r.k_offset) + h * r.qkv.stride[1];
        for (int64_t i = 0; i < d; ++i) {
          const uint16_t b = detail::float_to_half_bits(x[size_t(i)], dt);
          std::memcpy(r.qkv.at(base + i), &b, 2);
        }
      }
    }
  }
  for (HostTensor* view : {&r.k, &r.v}) {
    view->dtype = dt;
    view->shape = {n, hkv, d};
    view->stride = {r.qkv.stride[0], r.qkv.stride[1], 1};
  }
  return r;
}

uint16_t row_bits(const NewRows& r, int side, int64_t t, int64_t h, int64_t i) {
  uint16_t b;
  std::memcpy(&b, &r.qkv.bytes[size_t(2 * (t * r.qkv.stride[0] + (side ? r.v_offset : r.k_offset) +
                                           h * r.qkv.stride[1] + i))],
              2);
  return b;
}

// What run_append_kv must do, with the host quantizer.
void append_on_host(const Case& c, const NewRows& rows, const std::vector<int32_t>& slots, HostCache* cache) {
  const int64_t hkv = c.problem.num_kv_heads, d = c.problem.head_dim;
  std::vector<float> x(static_cast<size_t>(d));
  for (int64_t t = 0; t < c.problem.num_tokens; ++t) {
    const int64_t slot = slots[size_t(t)];
    if (slot < 0 || slot >= c.blocks * c.slots_per_block) continue;
    const int64_t block = slot / c.slots_per_block, pos = slot % c.slots_per_block;
    for (int side = 0; side < 2; ++side) {
      HostTensor& dst = side ? cache->v_cache : cache->k_cache;
      HostTensor& scales = side ? cache->v_scales : cache->k_scales;
      for (int64_t h = 0; h < hkv; ++h) {
        const int64_t element = block * dst.stride[0] + pos * dst.stride[1] + h * dst.stride[2];
        for (int64_t i = 0; i < d; ++i) {
          x[size_t(i)] = detail::half_bits_to_float(row_bits(rows, side, t, h, i), c.problem.dtype);
        }
        switch (dst.dtype) {
          case DType::kF16:
          case DType::kBF16:
            for (int64_t i = 0; i < d; ++i) {
              const uint16_t b = row_bits(rows, side, t, h, i);
              std::memcpy(dst.at(element + i), &b, 2);
            }
            break;
          case DType::kFP8E4M3: {
            const float scale = (side ? c.fp8_v_scales : c.fp8_k_scales)[size_t(h)];
            if (quant::check_fp8_row(int(d), scale).ok()) {
              quant::quantize_row_fp8(x.data(), int(d), scale, dst.at(element));
            } else {  // the kernel's answer to a bad device scale: NaN codes
              std::memset(dst.at(element), quant::kE4M3NaN, size_t(d));
            }
            break;
          }
          default: {
            quant::IntCacheView view;
            view.bits = dst.bits();
            view.head_dim = int(d);
            view.codes = dst.bytes.data();
            view.code_stride_block = dst.stride[0];
            view.code_stride_slot = dst.stride[1];
            view.code_stride_head = dst.stride[2];
            view.scales = reinterpret_cast<uint16_t*>(scales.bytes.data());
            view.scale_stride_block = scales.stride[0];
            view.scale_stride_head = scales.stride[1];
            view.scale_stride_slot = scales.stride[2];
            quant::write_cache_row(view, block, pos, h, x.data());
          }
        }
      }
    }
  }
}

// The case's buffers on the GPU.
struct DeviceState {
  DeviceBuffer qkv, slots, k_cache, v_cache, k_scales, v_scales;
  AppendKvTensors tensors;

  bool slots_64;  // int64 slots (vLLM's slot mapping), or int32

  DeviceState(const NewRows& rows, const std::vector<int32_t>& slot_values, const HostCache& cache,
              bool int64_slots = true)
      : qkv(DeviceBuffer::from(rows.qkv.bytes)),
        slots(std::max<size_t>(1, slot_values.size()) * (int64_slots ? 8 : 4)),
        k_cache(DeviceBuffer::from(cache.k_cache.bytes)),
        v_cache(DeviceBuffer::from(cache.v_cache.bytes)),
        k_scales(DeviceBuffer::from(cache.k_scales.bytes)),
        v_scales(DeviceBuffer::from(cache.v_scales.bytes)) {
    char* base = static_cast<char*>(qkv.get());
    tensors.k = rows.k.ref(base + 2 * rows.k_offset);
    tensors.v = rows.v.ref(base + 2 * rows.v_offset);
    slots_64 = int64_slots;
    upload_slots(slot_values);
    tensors.slots = TensorRef::contiguous(slots.get(), slots_64 ? DType::kI64 : DType::kI32,
                                          {int64_t(slot_values.size())});
    tensors.k_cache = cache.k_cache.ref(k_cache.get());
    tensors.v_cache = cache.v_cache.ref(v_cache.get());
    if (!cache.k_scales.bytes.empty()) {
      tensors.k_scales = cache.k_scales.ref(k_scales.get());
      tensors.v_scales = cache.v_scales.ref(v_scales.get());
    }
  }
  void upload(const NewRows& rows, const std::vector<int32_t>& slot_values) {
    qkv.upload(rows.qkv.bytes.data(), rows.qkv.bytes.size());
    upload_slots(slot_values);
  }
  void upload_slots(const std::vector<int32_t>& slot_values) {
    if (slot_values.empty()) return;
    if (slots_64) {
      const std::vector<int64_t> wide(slot_values.begin(), slot_values.end());
      slots.upload(wide.data(), wide.size() * sizeof(int64_t));
    } else {
      slots.upload(slot_values.data(), slot_values.size() * sizeof(int32_t));
    }
  }
  HostCache download(const HostCache& like) const {
    testing::check_cuda(cudaDeviceSynchronize(), "append kernel");
    HostCache h = like;
    const std::pair<const DeviceBuffer*, HostTensor*> parts[] = {
        {&k_cache, &h.k_cache}, {&v_cache, &h.v_cache}, {&k_scales, &h.k_scales}, {&v_scales, &h.v_scales}};
    for (const auto& [from, to] : parts) {
      if (!to->bytes.empty()) from->download(to->bytes.data(), to->bytes.size());
    }
    return h;
  }
};

// The first difference (and the count) between the expected and the GPU's cache, located.
std::string describe_differences(const HostCache& want, const HostCache& got, const Case& c, const NewRows& rows,
                                 const std::vector<int32_t>& slots) {
  std::ostringstream s;
  const char* names[] = {"k_cache", "v_cache", "k_scales", "v_scales"};
  const HostTensor* w[] = {&want.k_cache, &want.v_cache, &want.k_scales, &want.v_scales};
  const HostTensor* g[] = {&got.k_cache, &got.v_cache, &got.k_scales, &got.v_scales};
  for (int i = 0; i < 4; ++i) {
    int64_t first = -1, count = 0;
    for (size_t b = 0; b < w[i]->bytes.size(); ++b) {
      if (w[i]->bytes[b] != g[i]->bytes[b]) {
        if (first < 0) first = int64_t(b);
        ++count;
      }
    }
    if (count == 0) continue;
    const std::string where = w[i]->locate(first);
    s << names[i] << ": " << count << " bytes differ, first at byte " << first << " " << where << ": want 0x"
      << std::hex << int(w[i]->bytes[size_t(first)]) << " got 0x" << int(g[i]->bytes[size_t(first)]) << std::dec;
    if (w[i]->shape.size() != 4) {  // FP8 scales: never written
      s << "\n";
      continue;
    }
    // The token appended there, and the kind of its row.
    const int64_t e = first * 8 / w[i]->bits();
    const int64_t block = e / w[i]->stride[0];
    const bool pairs = i >= 2;
    const int64_t slot_in_block = pairs ? e % w[i]->stride[0] % w[i]->stride[1] / w[i]->stride[2]
                                        : e % w[i]->stride[0] / w[i]->stride[1];
    const int64_t head = pairs ? e % w[i]->stride[0] / w[i]->stride[1] : e % w[i]->stride[1] / w[i]->stride[2];
    const int64_t slot = block * c.slots_per_block + slot_in_block;
    for (size_t t = 0; t < slots.size(); ++t) {
      if (slots[t] == slot && where != "padding" && where != "guard" && !rows.kinds.empty()) {
        const size_t kind = (t * 2 + size_t(i % 2)) * size_t(c.problem.num_kv_heads) + size_t(head);
        s << " (token " << t << ", row kind " << kRowKindNames[int(rows.kinds[kind])] << ")";
      }
    }
    s << "\n";
  }
  return s.str();
}

std::string case_name(const Case& c, const std::string& layout) {
  return std::string(to_string(c.problem.kv_format)) + " " + to_string(c.problem.dtype) + " D=" +
         std::to_string(c.problem.head_dim) + " " + layout;
}

// Slots for appending count[b] tokens after start[b] of each sequence: paged caches take pages from
// a shuffled list; contiguous ones put sequence b at b * capacity. Padding tokens (-1), a slot past
// the cache and one below -1 are mixed in; they must leave the cache untouched.
std::vector<int32_t> make_slots(const Layout& l, std::mt19937_64& rng) {
  std::vector<int32_t> slots;
  std::vector<int64_t> pages(size_t(l.blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  size_t next_page = 0;
  const int64_t total = l.blocks * l.slots_per_block;
  for (size_t b = 0; b < l.start.size(); ++b) {
    std::vector<int64_t> table;
    if (l.page_size != 0) {
      const int64_t needed = (l.start[b] + l.count[b] + l.page_size - 1) / l.page_size;
      for (int64_t j = 0; j < needed; ++j) table.push_back(pages.at(next_page++));
    }
    for (int j = l.start[b]; j < l.start[b] + l.count[b]; ++j) {
      const int64_t slot = l.page_size != 0 ? table[size_t(j / l.page_size)] * l.page_size + j % l.page_size
                                            : int64_t(b) * l.slots_per_block + j;
      slots.push_back(int32_t(slot));
      if (j % 7 == 3) slots.push_back(-1);
    }
  }
  slots.insert(slots.begin() + int64_t(slots.size() / 2), int32_t(total));
  slots.insert(slots.begin() + 1, -7);
  slots.push_back(int32_t(total + 1000));
  return slots;
}

Case make_case(KvFormat format, DType dtype, int d, const Layout& l, int num_tokens) {
  Case c;
  c.problem.num_tokens = num_tokens;
  c.problem.num_kv_heads = l.num_kv_heads;
  c.problem.head_dim = d;
  c.problem.dtype = dtype;
  c.problem.kv_format = format;
  c.problem.page_size = l.page_size;
  c.blocks = l.blocks;
  c.slots_per_block = l.slots_per_block;
  c.padded = l.padded;
  for (int h = 0; h < l.num_kv_heads; ++h) {  // some saturate +-448, some reach the e4m3 subnormals
    c.fp8_k_scales.push_back(std::vector<float>{0.07f, 1.f, 0.0021f, 13.f}[size_t(h % 4)]);
    c.fp8_v_scales.push_back(std::vector<float>{0.5f, 0.013f, 3.f, 1e-4f}[size_t(h % 4)]);
  }
  return c;
}

// Runs the append on the GPU from `cache` and compares with the host; returns the GPU's cache.
HostCache run_and_compare(const Case& c, const NewRows& rows, const std::vector<int32_t>& slots, const HostCache& cache,
                          const std::string& name, bool int64_slots = true) {
  HostCache want = cache;
  append_on_host(c, rows, slots, &want);
  DeviceState dev(rows, slots, cache, int64_slots);
  const Status s = run_append_kv(c.problem, dev.tensors, nullptr);
  EXPECT_TRUE(s.ok()) << name << ": " << s.message();
  const HostCache got = dev.download(cache);
  EXPECT_TRUE(got == want) << name << ":\n" << describe_differences(want, got, c, rows, slots);
  return got;
}

std::vector<RowKind> all_row_kinds() {
  std::vector<RowKind> kinds;
  for (int k = 0; k < int(RowKind::kCount); ++k) kinds.push_back(RowKind(k));
  return kinds;
}

const Layout kLayouts[] = {
    {"paged16", 16, 12, 16, 2, true, {5, 0, 16, 3}, {37, 0, 21, 1}},  // partial first pages, a sequence with 0 tokens
    {"paged256", 256, 4, 256, 3, false, {250, 0}, {20, 300}},         // crossing a page, 3 KV heads
    {"contiguous", 0, 3, 64, 2, true, {0, 60, 10}, {33, 4, 0}},       // up to the capacity, a sequence with 0 tokens
};

struct FormatCase {
  KvFormat format;
  DType dtype;
  int head_dim;
};

class AppendKvGpu : public ::testing::TestWithParam<FormatCase> {};

// Every layout, every row kind, strided and fused tensors: the whole cache equals the host's.
TEST_P(AppendKvGpu, MatchesTheHostQuantizerByteForByte) {
  SPLITKV_REQUIRE_DEVICE();
  const FormatCase& f = GetParam();
  std::mt19937_64 rng(1234 + uint64_t(f.head_dim) + 7 * uint64_t(f.format) + 31 * uint64_t(f.dtype));
  for (const Layout& l : kLayouts) {
    const std::vector<int32_t> slots = make_slots(l, rng);
    const Case c = make_case(f.format, f.dtype, f.head_dim, l, int(slots.size()));
    const NewRows rows = make_rows(c, rng, all_row_kinds());
    run_and_compare(c, rows, slots, make_cache(c), case_name(c, l.name));
    run_and_compare(c, rows, slots, make_cache(c), case_name(c, l.name) + " (int32 slots)", false);
  }
}

// Every 16-bit pattern (NaN payloads, infinities, subnormals, both zeros) through every format:
// rows of consecutive patterns, K in order and V reversed, in a contiguous cache.
TEST_P(AppendKvGpu, EverySixteenBitPattern) {
  SPLITKV_REQUIRE_DEVICE();
  const FormatCase& f = GetParam();
  const Layout l{"sweep", 0, 1, 65536 / f.head_dim, 1, false, {0}, {65536 / f.head_dim}};
  std::vector<int32_t> slots(size_t(65536 / f.head_dim));
  std::iota(slots.begin(), slots.end(), 0);
  for (float scale : {1.f, 0.3712f, 1.f / 128, 700.f, 3e-5f}) {  // FP8: the division moves every pattern
    Case c = make_case(f.format, f.dtype, f.head_dim, l, int(slots.size()));
    c.fp8_k_scales = {scale};
    c.fp8_v_scales = {1.f / scale};
    std::mt19937_64 rng(1);
    NewRows rows = make_rows(c, rng, {RowKind::kNormal});  // then overwritten with the patterns
    for (int32_t t = 0; t < int32_t(slots.size()); ++t) {
      for (int i = 0; i < f.head_dim; ++i) {
        const uint16_t k = uint16_t(t * f.head_dim + i), v = uint16_t(65535 - k);
        std::memcpy(rows.qkv.at(t * rows.qkv.stride[0] + rows.k_offset + i), &k, 2);
        std::memcpy(rows.qkv.at(t * rows.qkv.stride[0] + rows.v_offset + i), &v, 2);
      }
    }
    rows.kinds.clear();
    run_and_compare(c, rows, slots, make_cache(c), case_name(c, "sweep scale " + std::to_string(scale)));
    if (c.traits().scales != detail::KvScales::kPerHead) break;  // the scale matters to FP8 only
  }
}

std::vector<FormatCase> format_cases() {
  std::vector<FormatCase> cases;
  for (KvFormat format : {KvFormat::kNative, KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      for (int d : {64, 128, 256}) cases.push_back({format, dtype, d});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Formats, AppendKvGpu, ::testing::ValuesIn(format_cases()),
                         [](const ::testing::TestParamInfo<FormatCase>& info) {
                           return std::string(to_string(info.param.format)) + "_" + to_string(info.param.dtype) +
                                  "_D" + std::to_string(info.param.head_dim);
                         });

// The explicit 16-bit formats are the native one spelled out.
TEST(AppendKvGpuSingle, ExplicitSixteenBitFormats) {
  SPLITKV_REQUIRE_DEVICE();
  std::mt19937_64 rng(5);
  for (auto [format, dtype] : {std::pair{KvFormat::kBF16, DType::kBF16}, std::pair{KvFormat::kF16, DType::kF16}}) {
    const std::vector<int32_t> slots = make_slots(kLayouts[0], rng);
    const Case c = make_case(format, dtype, 128, kLayouts[0], int(slots.size()));
    run_and_compare(c, make_rows(c, rng, all_row_kinds()), slots, make_cache(c), case_name(c, kLayouts[0].name));
  }
}

// NaN rows: the row's pair is (NaN, NaN) and its codes 0, the neighbouring slots (appended in the
// same call, before and after it in the page) are untouched by it.
TEST(AppendKvGpuSingle, NaNRowsStayInTheirRow) {
  SPLITKV_REQUIRE_DEVICE();
  std::mt19937_64 rng(9);
  const Layout l{"paged16", 16, 2, 16, 2, false, {4}, {3}};
  for (KvFormat format : {KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4, KvFormat::kFP8E4M3}) {
    const std::vector<int32_t> slots = {17, 18, 19};  // page 1, positions 1..3
    const Case c = make_case(format, DType::kBF16, 128, l, 3);
    NewRows rows = make_rows(c, rng, {RowKind::kNormal});
    for (int side = 0; side < 2; ++side) {  // token 1, head 0: NaN in K and V
      const uint16_t nan = testing::nan_bits(DType::kBF16);
      std::memcpy(rows.qkv.at(1 * rows.qkv.stride[0] + (side ? rows.v_offset : rows.k_offset) + 5), &nan, 2);
    }
    HostCache cache = make_cache(c);
    HostCache got = run_and_compare(c, rows, slots, cache, std::string("NaN rows ") + to_string(format));
    if (c.traits().scales == detail::KvScales::kPerTokenPair) {
      uint16_t pair[2];
      std::memcpy(pair, got.k_scales.at(1 * got.k_scales.stride[0] + 2 * got.k_scales.stride[2]), 4);  // slot 18, head 0
      EXPECT_EQ(pair[0], quant::kFp16NaN);
      EXPECT_EQ(pair[1], quant::kFp16NaN);
    }
  }
}

// FP8 scales are device data: one that is not positive and finite gives its head NaN codes (0x7f)
// instead of garbage; the other heads are unaffected.
TEST(AppendKvGpuSingle, BadFp8ScalesGiveNaNCodes) {
  SPLITKV_REQUIRE_DEVICE();
  std::mt19937_64 rng(10);
  const Layout l{"contiguous", 0, 2, 32, 4, false, {0, 5}, {9, 2}};
  const std::vector<int32_t> slots = make_slots(l, rng);
  Case c = make_case(KvFormat::kFP8E4M3, DType::kF16, 64, l, int(slots.size()));
  c.fp8_k_scales = {0.25f, 0.f, -1.f, kNaN};
  c.fp8_v_scales = {kInf, 2.f, std::numeric_limits<float>::denorm_min(), 1e30f};
  run_and_compare(c, make_rows(c, rng, all_row_kinds()), slots, make_cache(c), "bad fp8 scales");
}

// Zero tokens: success, nothing written, k / v / slots not even bound.
TEST(AppendKvGpuSingle, ZeroTokensWriteNothing) {
  SPLITKV_REQUIRE_DEVICE();
  std::mt19937_64 rng(11);
  const Case c = make_case(KvFormat::kInt4, DType::kBF16, 128, kLayouts[0], 0);
  const HostCache cache = make_cache(c);
  DeviceState dev(make_rows(c, rng, {RowKind::kNormal}), {}, cache);
  dev.tensors.k = dev.tensors.v = dev.tensors.slots = TensorRef{};
  ASSERT_TRUE(run_append_kv(c.problem, dev.tensors, nullptr).ok());
  EXPECT_TRUE(dev.download(cache) == cache);
}

// A long append (chunked prefill): many blocks of the grid, 8 KV heads, pages of 256.
TEST(AppendKvGpuSingle, LongAppend) {
  SPLITKV_REQUIRE_DEVICE();
  std::mt19937_64 rng(12);
  const Layout l{"paged256", 256, 24, 256, 8, true, {100, 7, 0}, {3000, 1500, 1}};
  const std::vector<int32_t> slots = make_slots(l, rng);
  for (KvFormat format : {KvFormat::kK8V4, KvFormat::kNative}) {
    const Case c = make_case(format, DType::kBF16, 128, l, int(slots.size()));
    run_and_compare(c, make_rows(c, rng, {RowKind::kNormal, RowKind::kOutliers}), slots, make_cache(c),
                    std::string("long ") + to_string(format));
  }
}

// Capture one call in a CUDA graph, then replay it with new slots and new rows: each replay
// appends where the slots now say (the second on top of the first).
TEST(AppendKvGpuSingle, CudaGraphReplayWithNewSlots) {
  SPLITKV_REQUIRE_DEVICE();
  std::mt19937_64 rng(13);
  const Layout l{"paged16", 16, 8, 16, 2, true, {0, 0}, {5, 3}};
  const std::vector<int32_t> first = {0, 1, 2, 3, 4, 32, 33, 34};
  const std::vector<int32_t> second = {5, -1, 6, 100, 35, 36, 127, -1};  // 127: the last slot
  for (KvFormat format : {KvFormat::kInt4, KvFormat::kFP8E4M3, KvFormat::kNative}) {
    const Case c = make_case(format, DType::kF16, 128, l, int(first.size()));
    NewRows rows = make_rows(c, rng, all_row_kinds());
    HostCache want = make_cache(c);
    DeviceState dev(rows, first, want);
    const gpu_test::CapturedCall graph(
        [&](cudaStream_t stream) { return run_append_kv(c.problem, dev.tensors, stream); });
    ASSERT_TRUE(graph.ok()) << graph.error();
    EXPECT_TRUE(dev.download(want) == want) << "capture must not run the kernel";
    for (const std::vector<int32_t>* slots : {&first, &second}) {
      if (slots == &second) rows = make_rows(c, rng, all_row_kinds());
      dev.upload(rows, *slots);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads ran on the legacy stream
      ASSERT_EQ(graph.replay(), cudaSuccess);
      append_on_host(c, rows, *slots, &want);
      const HostCache got = dev.download(want);
      EXPECT_TRUE(got == want) << to_string(format) << " replay " << (slots == &first ? 1 : 2) << ":\n"
                               << describe_differences(want, got, c, rows, *slots);
    }
  }
}

}  // namespace
}  // namespace splitkv
