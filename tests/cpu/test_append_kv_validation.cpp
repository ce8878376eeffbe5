// run_append_kv validates every argument before touching the GPU: each bad argument gives the
// expected Status naming it, and valid input (host memory here) gets past validation: nothing to
// do for 0 tokens, kNoDevice without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/formats.hpp"
#include "splitkv/splitkv.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv {
namespace {

constexpr KvFormat kAllFormats[] = {KvFormat::kNative, KvFormat::kBF16, KvFormat::kFP8E4M3,
                                    KvFormat::kInt8,   KvFormat::kInt4, KvFormat::kK8V4};
constexpr KvFormat kKcFormats[] = {KvFormat::kInt8Kc, KvFormat::kInt4Kc, KvFormat::kK8V4Kc};

// 16-byte aligned host memory (aligned new for an over-aligned element type).
struct alignas(16) Chunk {
  uint8_t bytes[16];
};
using HostMemory = std::vector<Chunk>;
HostMemory host_memory(int64_t bytes) { return HostMemory(size_t(bytes + 15) / 16); }
int64_t bytes_of(DType dtype, int64_t elements) { return (elements * bit_width(dtype) + 7) / 8; }

// A valid call on host memory (3 tokens, 2 KV heads, D = 128, 4 blocks); each test breaks one thing.
class AppendKvValidation : public ::testing::Test {
 protected:
  void SetUp() override { make(KvFormat::kInt8); }

  void make(KvFormat format, int page_size = 16) {
    p = AppendKvProblem{};
    p.num_tokens = 3;
    p.num_kv_heads = 2;
    p.head_dim = 128;
    p.dtype = DType::kBF16;
    p.kv_format = format;
    p.page_size = page_size;
    const int64_t blocks = 4, slots_per_block = page_size != 0 ? page_size : 40;
    const detail::KvFormatTraits f = detail::kv_format_traits(detail::resolve_kv_format(format, p.dtype));
    const int64_t rows = 3 * 2 * 128, cache = blocks * slots_per_block * 2 * 128;
    k_mem = host_memory(2 * rows);
    v_mem = host_memory(2 * rows);
    slot_mem = host_memory(3 * 8);
    kc_mem = host_memory(bytes_of(f.k_element, cache));
    vc_mem = host_memory(bytes_of(f.v_element, cache));
    ks_mem = host_memory(blocks * 2 * slots_per_block * 2 * 2);
    vs_mem = host_memory(blocks * 2 * slots_per_block * 2 * 2);
    t = AppendKvTensors{};
    t.k = TensorRef::contiguous(k_mem.data(), DType::kBF16, {3, 2, 128});
    t.v = TensorRef::contiguous(v_mem.data(), DType::kBF16, {3, 2, 128});
    t.slots = TensorRef::contiguous(slot_mem.data(), DType::kI64, {3});
    t.k_cache = TensorRef::contiguous(kc_mem.data(), f.k_element, {blocks, slots_per_block, 2, 128});
    t.v_cache = TensorRef::contiguous(vc_mem.data(), f.v_element, {blocks, slots_per_block, 2, 128});
    if (f.scales == detail::KvScales::kPerHead) {
      t.k_scales = TensorRef::contiguous(ks_mem.data(), DType::kF32, {2});
      t.v_scales = TensorRef::contiguous(vs_mem.data(), DType::kF32, {2});
    } else if (f.scales == detail::KvScales::kPerTokenPair) {
      t.k_scales = TensorRef::contiguous(ks_mem.data(), DType::kF16, {blocks, 2, slots_per_block, 2});
      t.v_scales = TensorRef::contiguous(vs_mem.data(), DType::kF16, {blocks, 2, slots_per_block, 2});
    }
    if (f.channel_keys) {  // group scales [blocks, Hkv, groups, 2 D], the tail ring, each token's place
      const int64_t groups = (slots_per_block + 63) / 64;
      ks_mem = host_memory(blocks * 2 * groups * 256 * 2);
      t.k_scales = TensorRef::contiguous(ks_mem.data(), DType::kF16, {blocks, 2, groups, 256});
      tail_mem = host_memory(4 * 2 * 128 * 128 * 2);
      t.k_tail = TensorRef::contiguous(tail_mem.data(), DType::kBF16, {4, 2, 128, 128});
      position_mem = host_memory(3 * 8);
      tail_slot_mem = host_memory(3 * 4);
      t.positions = TensorRef::contiguous(position_mem.data(), DType::kI64, {3});
      t.tail_slots = TensorRef::contiguous(tail_slot_mem.data(), DType::kI32, {3});
    }
  }

  void expect_error(const std::string& arg, StatusCode code = StatusCode::kInvalidArgument) {
    const Status s = run_append_kv(p, t, nullptr);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_EQ(s.argument(), arg) << s.message();
    EXPECT_NE(s.message().find(arg), std::string::npos) << s.message();
  }

  // A valid call: kNoDevice without a GPU. With one, host pointers must not reach a kernel (the GPU
  // tests run valid calls), so only validation is checked, by the absence of an argument error.
  void expect_valid() {
    if (testing::gpu_available()) return;
    const Status s = run_append_kv(p, t, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kNoDevice) << s.message();
  }

  // Breaks the problem of a fresh valid call in `format`, expects the error.
  void expect_problem_error(KvFormat format, const std::function<void(AppendKvProblem&)>& mutate,
                            const std::string& arg, StatusCode code = StatusCode::kInvalidArgument) {
    make(format);
    mutate(p);
    expect_error(arg, code);
  }

  AppendKvProblem p;
  AppendKvTensors t;
  HostMemory k_mem, v_mem, slot_mem, kc_mem, vc_mem, ks_mem, vs_mem, tail_mem, position_mem, tail_slot_mem;
};

TEST_F(AppendKvValidation, ValidCallsPassValidation) {
  for (KvFormat format : kAllFormats) {
    for (int page_size : {0, 16, 256}) {
      make(format, page_size);
      SCOPED_TRACE(std::string(to_string(format)) + " page_size " + std::to_string(page_size));
      expect_valid();
      p.num_tokens = 0;  // nothing to write: no launch, k / v / slots not read (may be empty)
      t.k = t.v = t.slots = TensorRef{};
      const Status s = run_append_kv(p, t, nullptr);
      EXPECT_TRUE(s.ok()) << s.message();
    }
  }
}

TEST_F(AppendKvValidation, ProblemSizesAndTypes) {
  auto broken = [&](const std::function<void(AppendKvProblem&)>& mutate, const std::string& arg,
                    StatusCode code = StatusCode::kInvalidArgument) {
    expect_problem_error(KvFormat::kInt8, mutate, arg, code);
  };
  broken([](AppendKvProblem& q) { q.num_tokens = -1; }, "num_tokens");
  broken([](AppendKvProblem& q) { q.num_kv_heads = 0; }, "num_kv_heads");
  broken([](AppendKvProblem& q) { q.dtype = DType::kF32; }, "dtype");
  broken([](AppendKvProblem& q) { q.dtype = DType::kI8; }, "dtype");
  broken([](AppendKvProblem& q) { q.dtype = static_cast<DType>(99); }, "dtype");
  broken([](AppendKvProblem& q) { q.kv_format = static_cast<KvFormat>(42); }, "kv_format");
  broken([](AppendKvProblem& q) { q.head_dim = 0; }, "head_dim");
  broken([](AppendKvProblem& q) { q.head_dim = 96; }, "head_dim", StatusCode::kUnsupported);
  broken([](AppendKvProblem& q) { q.head_dim = 63; }, "head_dim", StatusCode::kUnsupported);
  broken([](AppendKvProblem& q) { q.page_size = 8; }, "page_size");
  broken([](AppendKvProblem& q) { q.page_size = 24; }, "page_size");
  broken([](AppendKvProblem& q) { q.page_size = -16; }, "page_size");
  broken([](AppendKvProblem& q) { q.num_tokens = 2147483647, q.num_kv_heads = 8; }, "num_tokens");
  // A 16-bit cache holds the new rows' dtype; the rows are never converted.
  broken([](AppendKvProblem& q) { q.kv_format = KvFormat::kF16; }, "kv_format", StatusCode::kUnsupported);
  // An odd head dim cannot be packed in INT4 (invalid, the host quantizer's rule), on either side.
  for (KvFormat format : {KvFormat::kInt4, KvFormat::kK8V4}) {
    make(format);
    p.head_dim = 63;
    const Status s = run_append_kv(p, t, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_EQ(s.argument(), "head_dim");
    EXPECT_NE(s.message().find("even"), std::string::npos) << s.message();
  }
}

TEST_F(AppendKvValidation, NullPointers) {
  for (const char* arg : {"k", "v", "slots", "k_cache", "v_cache", "k_scales", "v_scales"}) {
    SetUp();
    TensorRef* tensors[] = {&t.k, &t.v, &t.slots, &t.k_cache, &t.v_cache, &t.k_scales, &t.v_scales};
    const char* names[] = {"k", "v", "slots", "k_cache", "v_cache", "k_scales", "v_scales"};
    for (int i = 0; i < 7; ++i) {
      if (std::string(names[i]) == arg) tensors[i]->data = nullptr;
    }
    expect_error(std::string(arg) + ".data");
  }
}

TEST_F(AppendKvValidation, NewRows) {
  t.k.dtype = DType::kF16;  // not the problem's dtype
  expect_error("k.dtype");
  SetUp();
  t.v.shape[0] = 4;  // num_tokens is 3
  expect_error("v.shape[0]");
  SetUp();
  t.k.shape[1] = 4;  // num_kv_heads is 2
  expect_error("k.shape[1]");
  SetUp();
  t.k.shape[2] = 64;
  expect_error("k.shape[2]");
  SetUp();
  t.v = TensorRef::contiguous(v_mem.data(), DType::kBF16, {3, 256});
  expect_error("v.rank");
  SetUp();
  t.k.stride[2] = 2;  // last dim not contiguous
  expect_error("k.stride[2]");
  SetUp();
  t.k.stride[1] = 130;  // rows not 16-byte aligned
  expect_error("k.stride[1]");
  SetUp();
  t.v.stride[0] = -t.v.stride[0];
  expect_error("v.stride[0]");
  SetUp();
  t.k.data = k_mem[0].bytes + 2;
  expect_error("k.data");
}

TEST_F(AppendKvValidation, Slots) {
  t.slots.dtype = DType::kF32;
  expect_error("slots.dtype");
  SetUp();
  t.slots.shape[0] = 2;
  expect_error("slots.shape[0]");
  SetUp();
  t.slots.data = slot_mem[0].bytes + 4;  // int64 needs 8-byte alignment
  expect_error("slots.data");
  SetUp();
  t.slots.stride[0] = 2;  // any stride is fine
  expect_valid();
  SetUp();
  t.slots.dtype = DType::kI32;  // int32 slots are accepted too
  t.slots.data = slot_mem[0].bytes + 4;
  expect_valid();
  SetUp();
  t.slots.dtype = DType::kI8;
  expect_error("slots.dtype");
}

TEST_F(AppendKvValidation, Caches) {
  t.k_cache.dtype = DType::kFP8E4M3;  // an int8 cache holds kI8 codes
  expect_error("k_cache.dtype");
  SetUp();
  t.k_cache.shape[1] = 32;  // page_size is 16
  expect_error("k_cache.shape[1]");
  SetUp();
  t.k_cache.shape[2] = 3;  // num_kv_heads is 2
  expect_error("k_cache.shape[2]");
  SetUp();
  t.v_cache.shape[3] = 64;
  expect_error("v_cache.shape[3]");
  SetUp();
  t.v_cache.shape[0] = 3;  // K and V have the same blocks
  expect_error("v_cache.shape[0]");
  SetUp();
  t.k_cache.stride[3] = 2;
  expect_error("k_cache.stride[3]");
  SetUp();
  t.v_cache.stride[1] = 8;  // 8 bytes: rows not 16-byte aligned
  expect_error("v_cache.stride[1]");
  SetUp();
  t.k_cache.data = kc_mem[0].bytes + 8;
  expect_error("k_cache.data");
  SetUp();
  t.k_cache.shape[0] = 0;
  expect_error("k_cache.shape[0]");
  make(KvFormat::kInt4);
  t.v_cache.stride[2] = 144;  // nibbles: 72 bytes, not a multiple of 16
  expect_error("v_cache.stride[2]");
  make(KvFormat::kK8V4);  // K holds int8 codes, V int4
  t.v_cache.dtype = DType::kI8;
  expect_error("v_cache.dtype");
  make(KvFormat::kNative, 0);
  t.k_cache.dtype = DType::kF16;  // native = the new rows' bf16
  expect_error("k_cache.dtype");
}

TEST_F(AppendKvValidation, PairScales) {
  for (KvFormat format : {KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    make(format);
    t.v_scales = TensorRef{};  // INT caches need them
    expect_error("v_scales.data");
    make(format);
    t.k_scales.dtype = DType::kF32;
    expect_error("k_scales.dtype");
  }
  make(KvFormat::kInt8);
  t.k_scales.shape[0] = 5;  // blocks of the cache: 4
  expect_error("k_scales.shape[0]");
  make(KvFormat::kInt8);
  t.v_scales.shape[1] = 1;  // num_kv_heads
  expect_error("v_scales.shape[1]");
  make(KvFormat::kInt8, 0);
  t.k_scales.shape[2] = 16;  // capacity of the contiguous cache: 40
  expect_error("k_scales.shape[2]");
  make(KvFormat::kInt8);
  t.k_scales.stride[3] = 2;  // the pair must be contiguous
  expect_error("k_scales.stride[3]");
  make(KvFormat::kInt8);
  t.k_scales.stride[1] = 33;  // odd: pairs would straddle words
  expect_error("k_scales.stride[1]");
  make(KvFormat::kInt8);
  t.v_scales.data = vs_mem[0].bytes + 2;
  expect_error("v_scales.data");
}

TEST_F(AppendKvValidation, Fp8AndNativeScales) {
  make(KvFormat::kFP8E4M3);
  t.k_scales = TensorRef{};
  expect_error("k_scales.data");
  make(KvFormat::kFP8E4M3);
  t.v_scales.shape[0] = 3;
  expect_error("v_scales.shape[0]");
  make(KvFormat::kFP8E4M3);
  t.k_scales.dtype = DType::kF16;
  expect_error("k_scales.dtype");
  make(KvFormat::kFP8E4M3);
  t.k_scales.stride[0] = 0;  // one scale for every head is fine
  expect_valid();
  make(KvFormat::kNative);
  t.k_scales = TensorRef::contiguous(ks_mem.data(), DType::kF32, {2});
  expect_error("k_scales");
}

// *_kc caches: group scales, the tail ring and each token's position and tail slot, by name; other
// formats take none of the tail tensors.
TEST_F(AppendKvValidation, ChannelKeyTails) {
  for (KvFormat format : kKcFormats) {
    for (int page_size : {0, 64, 128}) {
      make(format, page_size);
      SCOPED_TRACE(std::string(to_string(format)) + " page_size " + std::to_string(page_size));
      expect_valid();
      p.num_tokens = 0;  // k, v, slots, positions and tail slots are not read
      t.k = t.v = t.slots = t.positions = t.tail_slots = TensorRef{};
      const Status s = run_append_kv(p, t, nullptr);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    make(format, 16);  // a group of 64 positions never spans pages
    expect_error("page_size");
    make(format, 64);
    t.positions = TensorRef{};
    expect_error("positions.data");
    make(format, 64);
    t.positions.dtype = DType::kF32;
    expect_error("positions.dtype");
    make(format, 64);
    t.positions.shape[0] = 2;
    expect_error("positions.shape[0]");
    make(format, 64);
    t.positions.dtype = DType::kI32;  // int32 positions are fine
    expect_valid();
    make(format, 64);
    t.tail_slots.dtype = DType::kI64;
    expect_error("tail_slots.dtype");
    make(format, 64);
    t.tail_slots = TensorRef{};
    expect_error("tail_slots.data");
    make(format, 64);
    t.k_tail = TensorRef{};
    expect_error("k_tail.data");
    make(format, 64);
    t.k_tail.dtype = DType::kF16;  // the new rows' dtype
    expect_error("k_tail.dtype");
    make(format, 64);
    t.k_tail.shape[2] = 64;  // two groups of 64 rows
    expect_error("k_tail.shape[2]");
    make(format, 64);
    t.k_tail.shape[1] = 1;
    expect_error("k_tail.shape[1]");
    make(format, 64);
    t.k_tail.stride[0] = 0;  // written: two tail slots on one row
    expect_error("k_tail.stride[0]");
    make(format, 64);
    t.k_tail.data = t.v_cache.data;
    expect_error("k_tail");
    make(format, 64);
    t.k_scales.shape[3] = 2;  // per-token pairs: a *_kc cache's keys have group scales
    expect_error("k_scales.shape[3]");
    make(format, 64);
    t.k_scales.shape[2] = 2;  // page 64: one group
    expect_error("k_scales.shape[2]");
  }
  for (KvFormat format : kAllFormats) {
    make(format);
    HostMemory extra = host_memory(3 * 2 * 128 * 128 * 2);
    t.positions = TensorRef::contiguous(extra.data(), DType::kI64, {3});
    expect_error("positions");
    make(format);
    t.k_tail = TensorRef::contiguous(extra.data(), DType::kBF16, {3, 2, 128, 128});
    expect_error("k_tail");
  }
}

}  // namespace
}  // namespace splitkv
