// run_append_kv into *_kc caches (keys per channel over groups of 64 positions, a 16-bit tail ring)
// against the host definition (src/quant/kv_quant_kc.*, append_keys; values by the per-token host
// quantizer), byte for byte over every buffer: key codes, group scales, the ring, value codes and
// pairs, and a guard block past each. A sequence of calls walks each sequence through prefill
// chunks, decode steps, a chunk longer than the ring (a row taken by a later token of the call),
// a rollback of rejected drafts, and invalid tokens (slot -1, a tail slot outside the ring, a
// negative position, a position its page does not hold) between the runs.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/formats.hpp"
#include "common/half_convert.hpp"
#include "gpu_test_util.hpp"
#include "quant/kv_quant_host.hpp"
#include "quant/kv_quant_kc.hpp"
#include "quant/kv_rows.hpp"
#include "splitkv/append_kv.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

// A dense tensor's bytes plus a guard of one more outer slice, all starting as a sentinel pattern.
struct Bytes {
  DType dtype = DType::kI8;
  std::vector<int64_t> shape, stride;
  std::vector<uint8_t> bytes;
  int64_t tensor_bytes = 0;

  static Bytes make(DType dtype, std::vector<int64_t> shape, uint8_t salt) {
    Bytes t;
    t.dtype = dtype;
    t.shape = shape;
    t.stride.assign(shape.size(), 1);
    for (int i = int(shape.size()) - 2; i >= 0; --i) t.stride[size_t(i)] = shape[size_t(i) + 1] * t.stride[size_t(i) + 1];
    const int bits = bit_width(dtype);
    t.tensor_bytes = shape[0] * t.stride[0] * bits / 8;
    t.bytes.resize(size_t(t.tensor_bytes + t.stride[0] * bits / 8));
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = uint8_t((i * 131 + 17 + salt) ^ (i >> 7));
    return t;
  }
  TensorRef ref(void* data) const {
    TensorRef r;
    r.data = data;
    r.dtype = dtype;
    r.rank = int(shape.size());
    for (int i = 0; i < r.rank; ++i) r.shape[i] = shape[size_t(i)], r.stride[i] = stride[size_t(i)];
    return r;
  }
};

struct KcLayout {
  std::string name;
  int page_size = 0;   // 0: contiguous (a block per sequence of `slots` positions)
  int64_t blocks = 0, slots = 0;
  int num_kv_heads = 2;
};

struct Token {
  int64_t slot = -1, position = -1;
  int32_t tail_slot = -1;
};

struct Caches {
  Bytes k_codes, v_codes, k_groups, v_pairs, k_tail;
  std::vector<Bytes*> all() { return {&k_codes, &v_codes, &k_groups, &v_pairs, &k_tail}; }
};

constexpr const char* kBufferNames[] = {"k_cache (codes)", "v_cache", "k_scales (groups)", "v_scales", "k_tail"};

struct KcSetup {
  KvFormat format;
  DType dtype;
  int head_dim;
  KcLayout layout;
  int num_seqs = 3, num_tail_slots = 4;
  std::vector<std::vector<int64_t>> pages;  // per sequence: its blocks in position order
  std::vector<int32_t> tail_of;             // per sequence: its row of k_tail

  detail::KvFormatTraits traits() const { return detail::kv_format_traits(format); }
  int64_t capacity() const { return layout.page_size ? int64_t(pages[0].size()) * layout.page_size : layout.slots; }
  Token token(int seq, int64_t position) const {
    Token t;
    t.position = position;
    t.tail_slot = tail_of[size_t(seq)];
    t.slot = layout.page_size ? pages[size_t(seq)][size_t(position / layout.page_size)] * layout.page_size +
                                    position % layout.page_size
                              : seq * layout.slots + position;
    return t;
  }
};

Caches make_caches(const KcSetup& s) {
  const detail::KvFormatTraits f = s.traits();
  const int64_t B = s.layout.blocks, S = s.layout.slots, H = s.layout.num_kv_heads, D = s.head_dim;
  Caches c;
  c.k_codes = Bytes::make(f.k_element, {B, S, H, D}, 1);
  c.v_codes = Bytes::make(f.v_element, {B, S, H, D}, 2);
  c.k_groups = Bytes::make(DType::kF16, {B, H, (S + 63) / 64, 2 * D}, 3);
  c.v_pairs = Bytes::make(DType::kF16, {B, H, S, 2}, 4);
  c.k_tail = Bytes::make(s.dtype, {s.num_tail_slots, H, 128, D}, 5);
  return c;
}

// One call's new rows [N, Hkv, D] (16-bit bits): channels of different scales, a few x20 outlier
// channels per head, now and then a NaN or an infinity, or a constant channel.
std::vector<uint16_t> make_rows(const KcSetup& s, int64_t n, std::mt19937_64& rng) {
  const int64_t H = s.layout.num_kv_heads, D = s.head_dim;
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::vector<uint16_t> rows(size_t(std::max<int64_t>(n, 1) * H * D));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t c = 0; c < D; ++c) {
        float x = normal(rng) * (c % 7 == 0 ? 20.f : 1.f) + (c % 5 == 0 ? 3.f : 0.f);
        if (c == D - 1) x = 0.75f;  // a constant channel: scale 0, codes 0
        const float u = unit(rng);
        if (u < 2e-5f) x = std::numeric_limits<float>::quiet_NaN();
        else if (u < 4e-5f) x = std::numeric_limits<float>::infinity();
        rows[size_t((t * H + h) * D + c)] = detail::float_to_half_bits(x, s.dtype);
      }
    }
  }
  return rows;
}

bool token_valid(const KcSetup& s, const Token& t) {
  const int64_t S = s.layout.slots;
  return t.slot >= 0 && t.slot < s.layout.blocks * S && t.position >= 0 && t.tail_slot >= 0 &&
         t.tail_slot < s.num_tail_slots && t.slot % S == t.position % S;
}

// What one run_append_kv call must do: the host definition for the keys, per-token rows for the values.
void append_on_host(const KcSetup& s, Caches& c, const std::vector<Token>& tokens, const std::vector<uint16_t>& k,
                    const std::vector<uint16_t>& v) {
  const int64_t H = s.layout.num_kv_heads, D = s.head_dim;
  const quant::KcKeyCacheView kv = quant::kc_key_view(
      c.k_codes.ref(c.k_codes.bytes.data()), c.k_groups.ref(c.k_groups.bytes.data()), c.k_tail.ref(c.k_tail.bytes.data()));
  std::vector<float> keys(tokens.size() * size_t(H * D));
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = detail::half_bits_to_float(k[i], s.dtype);
  std::vector<quant::KcAppendToken> kc;
  for (size_t i = 0; i < tokens.size(); ++i) {
    kc.push_back({tokens[i].slot, tokens[i].position, tokens[i].tail_slot, &keys[i * size_t(H * D)]});
  }
  quant::append_keys(kv, kc);

  const quant::IntCacheView vv = quant::int_cache_view(c.v_codes.ref(c.v_codes.bytes.data()),
                                                       c.v_pairs.ref(c.v_pairs.bytes.data()));
  std::vector<float> x(static_cast<size_t>(D));
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!token_valid(s, tokens[i])) continue;
    const int64_t block = tokens[i].slot / s.layout.slots, offset = tokens[i].slot % s.layout.slots;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t e = 0; e < D; ++e) x[size_t(e)] = detail::half_bits_to_float(v[(i * H + h) * D + e], s.dtype);
      quant::write_cache_row(vv, block, offset, h, x.data());
    }
  }
}

struct Device {
  DeviceBuffer k_codes, v_codes, k_groups, v_pairs, k_tail;
  explicit Device(Caches& c)
      : k_codes(DeviceBuffer::from(c.k_codes.bytes)),
        v_codes(DeviceBuffer::from(c.v_codes.bytes)),
        k_groups(DeviceBuffer::from(c.k_groups.bytes)),
        v_pairs(DeviceBuffer::from(c.v_pairs.bytes)),
        k_tail(DeviceBuffer::from(c.k_tail.bytes)) {}
  std::vector<DeviceBuffer*> all() { return {&k_codes, &v_codes, &k_groups, &v_pairs, &k_tail}; }
};

// The call on the GPU (int64 or int32 slots and positions).
Status append_on_gpu(const KcSetup& s, Caches& shapes, Device& dev, const std::vector<Token>& tokens,
                     const std::vector<uint16_t>& k, const std::vector<uint16_t>& v, bool wide, cudaStream_t stream) {
  const int64_t N = int64_t(tokens.size()), H = s.layout.num_kv_heads, D = s.head_dim;
  std::vector<int64_t> slots64, positions64;
  std::vector<int32_t> slots32, positions32, tails;
  for (const Token& t : tokens) {
    slots64.push_back(t.slot), positions64.push_back(t.position);
    slots32.push_back(int32_t(t.slot)), positions32.push_back(int32_t(t.position));
    tails.push_back(t.tail_slot);
  }
  const DeviceBuffer dk = DeviceBuffer::from(k), dv = DeviceBuffer::from(v);
  const DeviceBuffer dslots = wide ? DeviceBuffer::from(slots64) : DeviceBuffer::from(slots32);
  const DeviceBuffer dpos = wide ? DeviceBuffer::from(positions64) : DeviceBuffer::from(positions32);
  const DeviceBuffer dtails = DeviceBuffer::from(tails);
  AppendKvProblem p;
  p.num_tokens = int(N);
  p.num_kv_heads = int(H);
  p.head_dim = int(D);
  p.dtype = s.dtype;
  p.kv_format = s.format;
  p.page_size = s.layout.page_size;
  AppendKvTensors t;
  t.k = TensorRef::contiguous(dk.get(), s.dtype, {N, H, D});
  t.v = TensorRef::contiguous(dv.get(), s.dtype, {N, H, D});
  const DType index = wide ? DType::kI64 : DType::kI32;
  t.slots = TensorRef::contiguous(dslots.get(), index, {N});
  t.positions = TensorRef::contiguous(dpos.get(), index, {N});
  t.tail_slots = TensorRef::contiguous(dtails.get(), DType::kI32, {N});
  t.k_cache = shapes.k_codes.ref(dev.k_codes.get());
  t.v_cache = shapes.v_codes.ref(dev.v_codes.get());
  t.k_scales = shapes.k_groups.ref(dev.k_groups.get());
  t.v_scales = shapes.v_pairs.ref(dev.v_pairs.get());
  t.k_tail = shapes.k_tail.ref(dev.k_tail.get());
  const Status status = run_append_kv(p, t, stream);
  testing::check_cuda(cudaDeviceSynchronize(), "append kernels");  // before the inputs are freed
  return status;
}

std::string compare(Caches& want, Device& dev) {
  std::ostringstream out;
  const std::vector<Bytes*> w = want.all();
  const std::vector<DeviceBuffer*> d = dev.all();
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<uint8_t> got(w[i]->bytes.size());
    d[i]->download(got.data(), got.size());
    int64_t first = -1, count = 0;
    for (size_t b = 0; b < got.size(); ++b) {
      if (got[b] != w[i]->bytes[b]) {
        if (first < 0) first = int64_t(b);
        ++count;
      }
    }
    if (count == 0) continue;
    out << kBufferNames[i] << ": " << count << " bytes differ, first at byte " << first
        << (first >= w[i]->tensor_bytes ? " (guard)" : "") << ": want 0x" << std::hex
        << int(w[i]->bytes[size_t(first)]) << " got 0x" << int(got[size_t(first)]) << std::dec << "\n";
  }
  return out.str();
}

// The calls of one case: per sequence, the positions [from, to) each call appends (in order),
// and invalid tokens mixed in.
struct Call {
  std::vector<std::pair<int64_t, int64_t>> runs;  // per sequence
  bool invalid_tokens = false;
};

// Skipped tokens go between the sequences' runs (a run is contiguous in the call: the API's rule),
// one of each kind, each a copy of a real token of the call with one field broken.
std::vector<Token> tokens_of(const KcSetup& s, const Call& call) {
  std::vector<Token> tokens;
  for (int seq = 0; seq < s.num_seqs; ++seq) {
    const auto [from, to] = call.runs[size_t(seq)];
    const int64_t end = std::min(to, s.capacity());
    for (int64_t pos = from; pos < end; ++pos) tokens.push_back(s.token(seq, pos));
    if (call.invalid_tokens && end > from) {
      for (int kind = 0; kind < 4; ++kind) {
        Token bad = s.token(seq, from + (end - from) * kind / 4);
        switch (kind) {
          case 0: bad.slot = -1; break;
          case 1: bad.tail_slot = s.num_tail_slots; break;
          case 2: bad.position = -1; break;
          default: bad.position += 1; break;  // its page does not hold that position
        }
        tokens.push_back(bad);
      }
    }
  }
  return tokens;
}

std::vector<Call> schedule(const KcSetup& s) {
  std::vector<Call> calls;
  std::vector<int64_t> len(size_t(s.num_seqs), 0);
  auto add = [&](std::vector<int64_t> counts, bool invalid, std::vector<int64_t> rollback = {}) {
    Call c;
    c.invalid_tokens = invalid;
    for (int seq = 0; seq < s.num_seqs; ++seq) {
      if (!rollback.empty()) len[size_t(seq)] = std::max<int64_t>(0, len[size_t(seq)] - rollback[size_t(seq)]);
      c.runs.push_back({len[size_t(seq)], len[size_t(seq)] + counts[size_t(seq)]});
      len[size_t(seq)] += counts[size_t(seq)];
    }
    calls.push_back(c);
  };
  add({150, 64, 1}, true);                        // prefill chunks
  for (int i = 0; i < 70; ++i) add({1, 1, 1}, false);  // decode steps, across group boundaries
  add({5, 200, 130}, true);                       // chunks longer than the ring
  add({4, 4, 4}, false, {30, 64, 3});             // rejected drafts rolled back, positions written again
  add({60, 0, 61}, false);
  add({0, 0, 300}, true);  // up to the capacity (contiguous: a last group that never completes)
  return calls;
}

struct KcCase {
  KvFormat format;
  DType dtype;
  int head_dim;
};

class AppendKcGpu : public ::testing::TestWithParam<KcCase> {};

TEST_P(AppendKcGpu, MatchesTheHostDefinitionByteForByte) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  const KcCase& kc = GetParam();
  const KcLayout layouts[] = {
      {"paged64", 64, 40, 64, 2},
      {"paged128", 128, 16, 128, 3},
      {"contiguous", 0, 3, 520, 2},  // capacity not a multiple of 64: the last group never completes
  };
  for (const KcLayout& l : layouts) {
    KcSetup s{kc.format, kc.dtype, kc.head_dim, l};
    std::mt19937_64 rng(77 + uint64_t(kc.head_dim) + 13 * uint64_t(kc.format) + 101 * uint64_t(kc.dtype));
    if (l.page_size) {  // shuffled pages, enough for 520 positions per sequence
      std::vector<int64_t> ids(size_t(l.blocks));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i);
      std::shuffle(ids.begin(), ids.end(), rng);
      const int64_t per_seq = (520 + l.page_size - 1) / l.page_size;
      for (int seq = 0; seq < s.num_seqs; ++seq) {
        s.pages.emplace_back(ids.begin() + seq * per_seq, ids.begin() + (seq + 1) * per_seq);
      }
    } else {
      s.pages.assign(size_t(s.num_seqs), {});
    }
    s.tail_of = {2, 0, 3};  // tail slot 1 is never used: its bytes must stay
    Caches want = make_caches(s);
    Device dev(want);
    const std::string name = std::string(to_string(kc.format)) + " " + to_string(kc.dtype) + " D=" +
                             std::to_string(kc.head_dim) + " " + l.name;
    int call_index = 0;
    for (const Call& call : schedule(s)) {
      const std::vector<Token> tokens = tokens_of(s, call);
      const std::vector<uint16_t> k = make_rows(s, int64_t(tokens.size()), rng);
      const std::vector<uint16_t> v = make_rows(s, int64_t(tokens.size()), rng);
      append_on_host(s, want, tokens, k, v);
      const Status st = append_on_gpu(s, want, dev, tokens, k, v, call_index % 2 == 0, nullptr);
      ASSERT_TRUE(st.ok()) << name << " call " << call_index << ": " << st.message();
      const std::string diff = compare(want, dev);
      ASSERT_TRUE(diff.empty()) << name << " after call " << call_index << " (" << tokens.size() << " tokens):\n"
                                << diff;
      ++call_index;
    }
  }
}

std::vector<KcCase> kc_cases() {
  std::vector<KcCase> cases;
  for (KvFormat format : {KvFormat::kInt8Kc, KvFormat::kInt4Kc, KvFormat::kK8V4Kc}) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      for (int d : {64, 128, 256}) cases.push_back({format, dtype, d});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Formats, AppendKcGpu, ::testing::ValuesIn(kc_cases()),
                         [](const ::testing::TestParamInfo<KcCase>& info) {
                           return std::string(to_string(info.param.format)) + "_" + to_string(info.param.dtype) +
                                  "_D" + std::to_string(info.param.head_dim);
                         });

// One captured call replayed with new tokens: each replay appends where its arrays now say.
TEST(AppendKcGpuSingle, CudaGraphReplayWithNewTokens) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  KcSetup s{KvFormat::kInt4Kc, DType::kBF16, 128, {"paged64", 64, 16, 64, 2}};
  s.num_seqs = 2;
  s.pages = {{3, 7, 1, 9}, {0, 2, 4, 6}};
  s.tail_of = {1, 0};
  Caches want = make_caches(s);
  Device dev(want);
  std::mt19937_64 rng(5);
  // Fixed-size steps of 66 tokens (33 per sequence): the graph's arrays keep their addresses.
  const int64_t n = 66, H = 2, D = 128;
  DeviceBuffer dk(size_t(n * H * D * 2)), dv(size_t(n * H * D * 2)), dslots(size_t(n * 8)), dpos(size_t(n * 8)),
      dtails(size_t(n * 4));
  AppendKvProblem p{int(n), int(H), int(D), s.dtype, s.format, 64};
  AppendKvTensors t;
  t.k = TensorRef::contiguous(dk.get(), s.dtype, {n, H, D});
  t.v = TensorRef::contiguous(dv.get(), s.dtype, {n, H, D});
  t.slots = TensorRef::contiguous(dslots.get(), DType::kI64, {n});
  t.positions = TensorRef::contiguous(dpos.get(), DType::kI64, {n});
  t.tail_slots = TensorRef::contiguous(dtails.get(), DType::kI32, {n});
  t.k_cache = want.k_codes.ref(dev.k_codes.get());
  t.v_cache = want.v_codes.ref(dev.v_codes.get());
  t.k_scales = want.k_groups.ref(dev.k_groups.get());
  t.v_scales = want.v_pairs.ref(dev.v_pairs.get());
  t.k_tail = want.k_tail.ref(dev.k_tail.get());
  const gpu_test::CapturedCall graph([&](cudaStream_t stream) { return run_append_kv(p, t, stream); });
  ASSERT_TRUE(graph.ok()) << graph.error();
  for (int step = 0; step < 6; ++step) {
    std::vector<Token> tokens;
    for (int seq = 0; seq < 2; ++seq) {
      for (int64_t i = 0; i < 33; ++i) tokens.push_back(s.token(seq, step * 33 + i));
    }
    const std::vector<uint16_t> k = make_rows(s, n, rng), v = make_rows(s, n, rng);
    std::vector<int64_t> slots, positions;
    std::vector<int32_t> tails;
    for (const Token& tok : tokens) slots.push_back(tok.slot), positions.push_back(tok.position), tails.push_back(tok.tail_slot);
    dk.upload(k.data(), k.size() * 2);
    dv.upload(v.data(), v.size() * 2);
    dslots.upload(slots.data(), slots.size() * 8);
    dpos.upload(positions.data(), positions.size() * 8);
    dtails.upload(tails.data(), tails.size() * 4);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(graph.replay(), cudaSuccess);
    append_on_host(s, want, tokens, k, v);
    const std::string diff = compare(want, dev);
    ASSERT_TRUE(diff.empty()) << "replay " << step << ":\n" << diff;
  }
}

}  // namespace
}  // namespace splitkv
