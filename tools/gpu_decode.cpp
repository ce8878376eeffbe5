// `splitkv verify` and `splitkv bench` for decode on the GPU.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench_harness.hpp"
#include "commands.hpp"
#include "common/formats.hpp"
#include "problem_builder.hpp"
#include "testing/decode_check.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {
namespace {

using testing::DeviceBuffer;

// The decode suite (docs/BENCHMARKING.md): bf16, D=128; one query per sequence and contiguous KV
// unless a row says otherwise.
struct SuiteRow {
  int batch, kv_len, num_q_heads, num_kv_heads;
  int q_len = 1;
  bool causal = false;
  int page_size = 0;
};
const SuiteRow kDecodeSuite[] = {
    {1, 1024, 32, 8},  {1, 4096, 32, 8},  {1, 16384, 32, 8},  {1, 65536, 32, 8}, {1, 131072, 32, 8},
    {8, 8192, 32, 8},  {8, 32768, 32, 8}, {32, 4096, 32, 8},  {64, 2048, 32, 8}, {128, 1024, 32, 8},
    {1, 32768, 32, 32}, {4, 32768, 64, 8},
    // Paged twins of two contiguous rows, and speculative decoding (q_len 2, 4, 8, causal).
    {1, 131072, 32, 8, 1, false, 16}, {1, 131072, 32, 8, 1, false, 64}, {8, 32768, 32, 8, 1, false, 16},
    {8, 32768, 32, 8, 1, false, 64},  {8, 8192, 32, 8, 4, true, 0},     {8, 8192, 32, 8, 2, true, 0},
    {8, 8192, 32, 8, 8, true, 0},     {8, 8192, 28, 4, 2, true, 0},     {8, 8192, 28, 4, 4, true, 0},
    {8, 8192, 28, 4, 8, true, 0}};
constexpr int kSweepRows = 12;  // the sweep covers the contiguous single-query rows

// One set of inputs and outputs on the device; benchmarks rotate over several (cold L2).
struct DecodeSet {
  DeviceBuffer q, k, v, out, seq_lens, block_table, k_scales, v_scales;
  DeviceBuffer k_tail, sinks;  // a *_kc cache's 16-bit tail ring; problem.sinks: a logit per query head
  DeviceBuffer tree_mask;      // problem.tree_mask: a binary draft tree per sequence
  DecodeTensors tensors;
};

// head_major: K/V in memory as [slabs, Hkv, tokens, D] (the tensors say so by their strides).
DecodeSet make_set(const DecodeProblem& p, bool head_major, uint64_t seed) {
  const int64_t B = p.batch, Lq = p.q_len, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype));
  DecodeSet s;
  const int64_t pages_per_seq = p.page_size ? (p.max_kv_len + p.page_size - 1) / p.page_size : 0;
  const int64_t slabs = p.page_size ? B * pages_per_seq : B;
  const int64_t slab_tokens = p.page_size ? p.page_size : p.max_kv_len;
  const size_t kv_elems = size_t(slabs * slab_tokens * Hkv * D), q_elems = size_t(B * Lq * Hq * D);
  const size_t qo_bytes = q_elems * size_t(detail::element_traits(p.dtype).bits / 8);
  s.q = DeviceBuffer(qo_bytes);
  s.out = DeviceBuffer(qo_bytes);
  const size_t k_bytes = kv_elems * size_t(detail::element_traits(kv.k_element).bits) / 8;
  const size_t v_bytes = kv_elems * size_t(detail::element_traits(kv.v_element).bits) / 8;
  s.k = DeviceBuffer(k_bytes);
  s.v = DeviceBuffer(v_bytes);
  // Random 16-bit values; a quantized cache takes their bytes as codes (the fill counts 16-bit words).
  fill_random_device(s.q.get(), q_elems, p.dtype, seed);
  fill_random_device(s.k.get(), k_bytes / 2, kv.quantized ? DType::kBF16 : kv.k_element, seed + 1);
  fill_random_device(s.v.get(), v_bytes / 2, kv.quantized ? DType::kBF16 : kv.v_element, seed + 2);
  TimingScales scales = timing_scales(detail::resolve_kv_format(p.kv_format, p.dtype), Hkv, slabs, slab_tokens, D,
                                      &s.tensors.k_scales, &s.tensors.v_scales);
  s.k_scales = std::move(scales.k);
  s.v_scales = std::move(scales.v);
  if (kv.channel_keys) {  // sequence b's tail is row b of the ring
    const size_t tail_elems = size_t(B * Hkv * detail::kKeyTailRows * D);
    s.k_tail = DeviceBuffer(tail_elems * size_t(detail::element_traits(p.dtype).bits / 8));
    fill_random_device(s.k_tail.get(), tail_elems, p.dtype, seed + 3);
    s.tensors.k_tail = TensorRef::contiguous(s.k_tail.get(), p.dtype, {B, Hkv, detail::kKeyTailRows, D});
  }
  if (p.sinks) {
    s.sinks = DeviceBuffer::from(std::vector<float>(size_t(Hq), 0.5f));
    s.tensors.sinks = TensorRef::contiguous(s.sinks.get(), DType::kF32, {Hq});
  }
  if (p.tree_mask) {  // draft i hangs under draft (i - 1) / 2 (draft 0 under the prefix): a binary tree
    const int64_t row_bytes = (Lq + 7) / 8;
    std::vector<uint8_t> bits(size_t(B * Lq * row_bytes), 0);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < Lq; ++i) {
        uint8_t* row = &bits[size_t((b * Lq + i) * row_bytes)];
        for (int64_t j = i;; j = (j - 1) / 2) {
          row[j / 8] |= uint8_t(1u << (j % 8));
          if (j == 0) break;
        }
      }
    }
    s.tree_mask = DeviceBuffer::from(bits);
    s.tensors.tree_mask = TensorRef::contiguous(s.tree_mask.get(), DType::kI8, {B, Lq, row_bytes});
  }
  s.seq_lens = DeviceBuffer::from(std::vector<int32_t>(size_t(B), p.max_kv_len));
  s.tensors.q = TensorRef::contiguous(s.q.get(), p.dtype, {B, Lq, Hq, D});
  s.tensors.out = TensorRef::contiguous(s.out.get(), p.dtype, {B, Lq, Hq, D});
  s.tensors.k = testing::kv_cache_ref(s.k.get(), kv.k_element, slabs, slab_tokens, Hkv, Hkv, D, head_major);
  s.tensors.v = testing::kv_cache_ref(s.v.get(), kv.v_element, slabs, slab_tokens, Hkv, Hkv, D, head_major);
  s.tensors.seq_lens = TensorRef::contiguous(s.seq_lens.get(), DType::kI32, {B});
  if (p.page_size) s.block_table = shuffled_block_table(B, pages_per_seq, seed, &s.tensors.block_table);
  return s;
}

// Keys a call must read per sequence: all of them, or with a left window those some query sees.
int64_t visible_keys(const DecodeProblem& p) {
  if (p.window_left < 0) return p.max_kv_len;
  return std::min<int64_t>(p.max_kv_len, int64_t(p.window_left) + p.q_len);
}

// Bytes a call must move: K and V as stored (codes and per-token scales) of the keys some query
// sees, plus Q and O.
double decode_bytes(const DecodeProblem& p) {
  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype));
  const double kv_elems = double(p.batch) * visible_keys(p) * p.num_kv_heads * p.head_dim;
  const double kv_tokens = double(p.batch) * visible_keys(p) * p.num_kv_heads;
  const double qo_elems = 2.0 * p.batch * p.q_len * p.num_q_heads * p.head_dim;
  // (scale, min) fp16 pairs per token, or per 64-position group and channel for *_kc keys.
  const double pair_bytes = kv.scales == detail::KvScales::kPerTokenPair ? 4 * kv_tokens : 0.0;
  const double k_scale_bytes = kv.channel_keys ? 4.0 * p.head_dim * kv_tokens / detail::kKeyGroup : pair_bytes;
  const double scale_bytes = k_scale_bytes + pair_bytes;
  return kv_elems * (detail::element_traits(kv.k_element).bits + detail::element_traits(kv.v_element).bits) / 8 +
         scale_bytes + qo_elems * detail::element_traits(p.dtype).bits / 8;
}

Status measure_decode(const DecodeProblem& p, const PlanOptions& options, bool head_major, int replays, Plan* plan,
                      ResultRow* row) {
  DeviceInfo device;
  if (Status s = query_device(0, &device); !s) return s;
  if (Status s = plan_decode(p, device, options, plan); !s) return s;
  row->bytes = decode_bytes(p);
  row->flops = 4.0 * p.batch * p.num_q_heads * p.q_len * double(visible_keys(p)) * p.head_dim;
  // Sets of inputs to rotate over: enough that the bytes read exceed L2 (>= 1 GiB), but with a
  // window the bytes read are a sliver of each set's cache, so the sets' whole footprint is capped
  // at 16 GiB (a window over a long context is then timed with its keys partly in L2).
  DecodeProblem whole = p;
  whole.window_left = -1;
  const int sets = std::max(1, std::min(sets_for_cold_l2(row->bytes, 64), int(double(16ll << 30) / decode_bytes(whole))));
  std::vector<DecodeSet> data;
  for (int i = 0; i < sets; ++i) data.push_back(make_set(p, head_major, 100 + 3 * i));
  const Plan& pl = *plan;
  if (Status s = time_rotating_calls(sets, 32, replays, pl,
                                     [&](int set, void* ws, Stream stream) {
                                       return run_decode(pl, data[set].tensors, ws, pl.workspace_bytes(), stream);
                                     },
                                     &row->timing);
      !s) {
    return s;
  }
  row->case_fields = case_fields(
      {p.batch, p.num_q_heads, p.num_kv_heads, p.q_len, p.max_kv_len, p.head_dim, p.dtype, p.causal, p.page_size}, pl);
  row->case_fields.add("kv_format", to_string(detail::resolve_kv_format(p.kv_format, p.dtype)));
  row->case_fields.add("kv_layout", head_major ? "head-major" : "token-major");
  add_variant_fields(p.window_left, p.window_right, p.softcap, p.sinks, &row->case_fields);
  if (p.tree_mask) row->case_fields.add("tree_mask", true);
  return Status::success();
}

// head_major: per row, whether its cache is stored head-major (empty: o.kv_head_major for every row).
int run_rows(const std::vector<DecodeProblem>& problems, const std::vector<PlanOptions>& options, const CliOptions& o,
             const char* suite, const std::vector<bool>& head_major = {}) {
  std::printf("measuring the read-bandwidth ceiling (4 GiB plain read kernel)...\n");
  const double ceiling = measure_read_ceiling_gbps();
  std::printf("read ceiling: %.0f GB/s on %s\n", ceiling, gpu_name().c_str());
  std::printf("   B      Lk  Hq/Hkv  Lq page   kv splits       us     GB/s  ceil%%  spread\n");
  Results results(suite, ceiling);
  for (size_t i = 0; i < problems.size(); ++i) {
    const DecodeProblem& p = problems[i];
    if (!o.shape_given && results.skip_unbuilt(p.head_dim, p.dtype)) continue;  // a suite on a reduced build
    Plan plan;
    ResultRow row;
    const bool row_head_major = head_major.empty() ? o.kv_head_major : bool(head_major[i]);
    if (Status s = measure_decode(p, options[i], row_head_major, o.iters, &plan, &row); !s) {
      std::printf("  %s\n", s.message().c_str());
      results.fail();
      continue;
    }
    const double gbps = row.bytes / (row.timing.us_per_call * 1e-6) / 1e9;
    std::printf("%4d %7d %3d/%-3d %3d%s %4d %5s %5d %8.2f %8.0f %6.1f%% %6.1f%%\n", p.batch, p.max_kv_len,
                p.num_q_heads, p.num_kv_heads, p.q_len, p.causal ? "c" : " ", p.page_size,
                to_string(detail::resolve_kv_format(p.kv_format, p.dtype)), plan.num_splits(), row.timing.us_per_call,
                gbps, 100.0 * gbps / ceiling, 100.0 * row.timing.spread);
    std::fflush(stdout);
    results.add(row);
  }
  return results.finish(o.json_path);
}

DecodeProblem suite_problem(const CliOptions& o, const Formats& formats, const SuiteRow& r) {
  CliOptions row = o;
  row.batch = r.batch, row.kv_len = r.kv_len, row.num_q_heads = r.num_q_heads, row.num_kv_heads = r.num_kv_heads;
  row.q_len = r.q_len, row.causal = r.causal, row.page_size = r.page_size;
  return to_decode_problem(row, formats);
}

// The decode half of the variants suite (docs/BENCHMARKING.md; issue 53's rows), each variant row
// next to the row it is judged against: windows 128 and 4096 over 32k and 128k contexts (B 1, 8,
// 64) beside the same batch over a context of the window's width; softcap 50 at B=8 32k beside the
// plain row; gpt-oss-shaped rows (64/8 heads, D=64, window 128 and sinks, q_len 1 and 4, bf16 and
// FP8 caches, B 1..256 over 8k) beside the same rows without their variants; tree-mask rows (B=32,
// 8k, 16 drafts in a binary tree) beside the same causal speculative rows.
std::vector<DecodeProblem> variants_suite(const CliOptions& o, const Formats& formats) {
  std::vector<DecodeProblem> rows;
  auto row = [&](int batch, int kv_len, int hq, int hkv, int q_len, int d, KvFormat format, int window, float cap,
                 bool sinks) {
    DecodeProblem p = suite_problem(o, formats, SuiteRow{batch, kv_len, hq, hkv, q_len, q_len > 1, 0});
    p.head_dim = d;
    p.kv_format = format;
    p.window_left = window;
    p.softcap = cap;
    p.sinks = sinks;
    rows.push_back(p);
  };
  for (int batch : {1, 8, 64}) {
    for (int window : {128, 4096}) {
      row(batch, window, 32, 8, 1, 128, KvFormat::kNative, -1, 0.f, false);  // the context of the window's width
      for (int kv_len : {32768, 131072}) {
        if (batch == 64 && kv_len > 32768) continue;  // (34 GB of cache to read 4k of it)
        row(batch, kv_len, 32, 8, 1, 128, KvFormat::kNative, window, 0.f, false);
      }
    }
  }
  row(8, 32768, 32, 8, 1, 128, KvFormat::kNative, -1, 0.f, false);
  row(8, 32768, 32, 8, 1, 128, KvFormat::kNative, -1, 50.f, false);
  for (KvFormat format : {KvFormat::kNative, KvFormat::kFP8E4M3}) {
    for (int q_len : {1, 4}) {
      for (int batch : {1, 16, 64, 256}) {
        row(batch, 8192, 64, 8, q_len, 64, format, -1, 0.f, false);
        row(batch, 8192, 64, 8, q_len, 64, format, 128, 0.f, true);
      }
    }
  }
  for (KvFormat format : {KvFormat::kNative, KvFormat::kFP8E4M3}) {
    row(32, 8192, 32, 8, 16, 128, format, -1, 0.f, false);
    row(32, 8192, 32, 8, 16, 128, format, -1, 0.f, false);
    rows.back().tree_mask = true;
  }
  return rows;
}

}  // namespace

int gpu_decode_bench(const CliOptions& o) {
  Formats formats;
  PlanOptions options;
  if (!parse_formats_and_options(o, &formats, &options)) return 1;
  std::vector<DecodeProblem> problems;
  std::vector<PlanOptions> plan_options;
  if (o.suite == "sweep") {
    // Every split count on every contiguous single-query row: the data the split heuristic is tuned from.
    for (int i = 0; i < kSweepRows; ++i) {
      for (int splits : {0, 1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
        problems.push_back(suite_problem(o, formats, kDecodeSuite[i]));
        PlanOptions po = options;
        po.num_splits = splits;
        plan_options.push_back(po);
      }
    }
    return run_rows(problems, plan_options, o, "decode-sweep");
  }
  if (o.suite == "quant") {
    // Every KV format on the decode suite's long, short, batched, paged and speculative rows, next
    // to the 16-bit cache of the same shape (same run); on the long rows INT4 and K8V4 also over a
    // head-major cache, whose 64-byte INT4 rows then fill whole lines (docs/KV_FORMATS.md); the
    // keys-per-channel formats where their decode kernel serves the row.
    std::vector<bool> head_major;
    for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 9, 12, 14, 16}) {
      for (KvFormat f : {KvFormat::kNative, KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
        const bool long_row = i == 3 || i == 4 || i == 6 || i == 12;
        for (bool hm : {false, true}) {
          // (with --kv-head-major every row is head-major already: no twin)
          if (hm && (o.kv_head_major || !(long_row && (f == KvFormat::kInt4 || f == KvFormat::kK8V4)))) continue;
          DecodeProblem p = suite_problem(o, formats, kDecodeSuite[i]);
          p.kv_format = f;
          problems.push_back(p);
          plan_options.push_back(options);
          head_major.push_back(hm || o.kv_head_major);
        }
      }
      // Keys per channel (*_kc) through their decode kernel, decode_kc_n8 (<= 8 packed rows, D <= 128,
      // whole 64-key groups per page), on the rows it serves.
      DecodeProblem p = suite_problem(o, formats, kDecodeSuite[i]);
      const int packed_rows = p.q_len * (p.num_q_heads / p.num_kv_heads);
      if (packed_rows > 8 || p.head_dim > 128 || p.page_size % detail::kKeyGroup != 0) continue;
      for (KvFormat f : {KvFormat::kInt8Kc, KvFormat::kInt4Kc, KvFormat::kK8V4Kc}) {
        p.kv_format = f;
        problems.push_back(p);
        PlanOptions kc = options;
        if (kc.family.empty()) kc.family = "decode_kc_n8";
        plan_options.push_back(kc);
        head_major.push_back(o.kv_head_major);
      }
    }
    return run_rows(problems, plan_options, o, "quant", head_major);
  }
  if (o.suite == "variants") {
    for (const DecodeProblem& p : variants_suite(o, formats)) {
      problems.push_back(p);
      plan_options.push_back(options);
    }
    return run_rows(problems, plan_options, o, "variants");
  }
  if (o.shape_given) {
    problems.push_back(to_decode_problem(o, formats));
    plan_options.push_back(options);
    return run_rows(problems, plan_options, o, "decode-single");
  }
  for (const SuiteRow& r : kDecodeSuite) {
    problems.push_back(suite_problem(o, formats, r));
    plan_options.push_back(options);
  }
  return run_rows(problems, plan_options, o, "decode");
}

int gpu_decode_verify(const CliOptions& o) {
  Formats formats;
  PlanOptions options;
  if (!parse_formats_and_options(o, &formats, &options)) return 1;
  testing::DecodeCaseSpec spec;
  spec.problem = to_decode_problem(o, formats);
  spec.seed = o.seed;
  spec.head_major_kv = o.kv_head_major;
  DeviceInfo device;
  Plan plan;
  Status status = query_device(0, &device);
  if (status) status = plan_decode(spec.problem, device, options, &plan);
  if (int rc = print_if_error(status)) return rc;
  testing::DecodeCase c = testing::make_decode_case(spec);
  return run_and_report<testing::DeviceDecodeCase>(plan, c, run_decode, testing::check_decode, "gpu decode");
}

}  // namespace splitkv::cli
