// `splitkv verify` and `splitkv bench` for prefill on the GPU (suites: prefill, strategies).
#include <algorithm>
#include <iterator>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "commands.hpp"
#include "common/formats.hpp"
#include "problem_builder.hpp"
#include "testing/chunk_case.hpp"
#include "testing/device_buffer.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv::cli {
namespace {

using testing::DeviceBuffer;

// The prefill suite (docs/BENCHMARKING.md). K/V are token tensors [B, Lk, Hkv, D] unless a row reads
// them from a KV cache (PrefillProblem::kv_cache) that holds all Lk keys of each sequence.
struct SuiteRow {
  int batch, num_q_heads, num_kv_heads, q_len, kv_len, head_dim;
  DType dtype;
  bool causal;
  bool kv_cache = false;
  int page_size = 0;  // kv_cache: 0 contiguous, else paged with a shuffled block table
  KvFormat kv_format = KvFormat::kNative;  // kv_cache: a quantized cache is dequantized first
};
const SuiteRow kPrefillSuite[] = {
    {4, 12, 12, 1024, 1024, 64, DType::kF16, false},     {4, 12, 12, 4096, 4096, 64, DType::kF16, false},
    {4, 12, 12, 8192, 8192, 64, DType::kF16, false},     {2, 12, 12, 16384, 16384, 64, DType::kF16, false},
    {16, 16, 16, 1024, 1024, 128, DType::kBF16, false},  {4, 16, 16, 4096, 4096, 128, DType::kBF16, false},
    {1, 16, 16, 16384, 16384, 128, DType::kBF16, false}, {16, 16, 16, 1024, 1024, 128, DType::kBF16, true},
    {4, 16, 16, 4096, 4096, 128, DType::kBF16, true},    {1, 16, 16, 16384, 16384, 128, DType::kBF16, true},
    // D=256 (the Hopper family only) and GQA 32/8.
    {4, 16, 16, 4096, 4096, 256, DType::kBF16, false},   {4, 16, 16, 4096, 4096, 256, DType::kBF16, true},
    {4, 32, 8, 4096, 4096, 128, DType::kBF16, true},
    // Chunked prefill: a chunk of Lq queries after Lk - Lq prefix tokens. Each shape three ways: token
    // tensors, then in one call over a KV cache whose last Lq keys are the chunk's own (seq_lens = Lk),
    // contiguous and paged (16 tokens a page); two of them also with 256-token pages.
    {1, 32, 8, 1024, 32768 + 1024, 128, DType::kBF16, true},
    {1, 32, 8, 1024, 32768 + 1024, 128, DType::kBF16, true, true, 0},
    {1, 32, 8, 1024, 32768 + 1024, 128, DType::kBF16, true, true, 16},
    {1, 32, 8, 4096, 32768 + 4096, 128, DType::kBF16, true},
    {1, 32, 8, 4096, 32768 + 4096, 128, DType::kBF16, true, true, 0},
    {1, 32, 8, 4096, 32768 + 4096, 128, DType::kBF16, true, true, 16},
    {8, 32, 8, 256, 8192 + 256, 128, DType::kBF16, true},
    {8, 32, 8, 256, 8192 + 256, 128, DType::kBF16, true, true, 0},
    {8, 32, 8, 256, 8192 + 256, 128, DType::kBF16, true, true, 16},
    // Pages of 256 tokens hold whole K/V tiles: one TMA box per tile instead of one per 16 keys.
    {1, 32, 8, 1024, 32768 + 1024, 128, DType::kBF16, true, true, 256},
    {8, 32, 8, 256, 8192 + 256, 128, DType::kBF16, true, true, 256},
    // Chunks shorter than a tile: GQA packing (a KV head's 4 query heads x 32 queries in one tile).
    {8, 32, 8, 32, 8192 + 32, 128, DType::kBF16, true},
    {8, 32, 8, 32, 8192 + 32, 128, DType::kBF16, true, true, 0},
    {8, 32, 8, 32, 8192 + 32, 128, DType::kBF16, true, true, 16},
    // The first chunked shape over quantized paged caches (docs/KV_FORMATS.md).
    {1, 32, 8, 1024, 32768 + 1024, 128, DType::kBF16, true, true, 16, KvFormat::kInt8},
    {1, 32, 8, 1024, 32768 + 1024, 128, DType::kBF16, true, true, 16, KvFormat::kInt4},
    {1, 32, 8, 4096, 32768 + 4096, 128, DType::kBF16, true, true, 16, KvFormat::kInt4}};

// The strategies suite: the default next to the original design's alternatives (split-V, two-pass
// and independent K/V tiles on the mma.sync families; two-pass and independent K/V tiles on the
// wgmma kernel) and the sm90 family's three-consumer tile at D=64, on the first rows of the prefill
// suite (a variant whose family does not serve a row's head dim shows n/a).
constexpr int kStrategyRows = 10;
struct Variant {
  const char* name;
  Strategy strategy;
  const char* family;  // "": the planner's choice
};
const Variant kDefaultVariant = {"default", Strategy::kAuto, ""};
const Variant kStrategyVariants[] = {kDefaultVariant,
                                     {"split-v", Strategy::kSplitV, ""},
                                     {"two-pass", Strategy::kTwoPass, ""},
                                     {"sm90-two-pass", Strategy::kTwoPass, "prefill_sm90_twopass"},
                                     {"k16-v64", Strategy::kAuto, "prefill_mma_k16v64"},
                                     {"sm90-k128-v64", Strategy::kAuto, "prefill_sm90_v64"},
                                     {"sm90-m192", Strategy::kAuto, "prefill_sm90_m192"}};

struct PrefillSet {
  DeviceBuffer q, k, v, out, seq_lens, block_table;
  DeviceBuffer k_tail;  // a *_kc cache's 16-bit tail ring (sequence b's: row b)
  TimingScales scales;
  PrefillTensors tensors;
};

// K and V are B slabs of Lk tokens (token tensors, or a contiguous cache of capacity Lk), or pages of
// page_size tokens, ceil(Lk / page_size) per sequence, each page owned by one sequence in a shuffled
// order. A cache holds every key of the problem: seq_lens[b] = Lk, the prefix and the chunk.
PrefillSet make_set(const PrefillProblem& p, uint64_t seed) {
  const int64_t B = p.batch, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(p.kv_format, p.dtype));
  const int64_t pages_per_seq = p.page_size ? (p.max_kv_len + p.page_size - 1) / p.page_size : 0;
  const int64_t slabs = p.page_size ? B * pages_per_seq : B;
  const int64_t slab_tokens = p.page_size ? p.page_size : p.max_kv_len;
  const size_t q_elems = size_t(B * p.max_q_len * Hq * D), kv_elems = size_t(slabs * slab_tokens * Hkv * D);
  PrefillSet s;
  s.q = DeviceBuffer(q_elems * size_t(detail::element_traits(p.dtype).bits / 8));
  s.out = DeviceBuffer(q_elems * size_t(detail::element_traits(p.dtype).bits / 8));
  const size_t k_bytes = kv_elems * size_t(detail::element_traits(kv.k_element).bits) / 8;
  const size_t v_bytes = kv_elems * size_t(detail::element_traits(kv.v_element).bits) / 8;
  s.k = DeviceBuffer(k_bytes);
  s.v = DeviceBuffer(v_bytes);
  // Random 16-bit values; a quantized cache takes their bytes as codes (the fill counts 16-bit words).
  fill_random_device(s.q.get(), q_elems, p.dtype, seed);
  fill_random_device(s.k.get(), k_bytes / 2, kv.quantized ? DType::kBF16 : kv.k_element, seed + 1);
  fill_random_device(s.v.get(), v_bytes / 2, kv.quantized ? DType::kBF16 : kv.v_element, seed + 2);
  s.tensors.q = TensorRef::contiguous(s.q.get(), p.dtype, {B, p.max_q_len, Hq, D});
  s.tensors.out = TensorRef::contiguous(s.out.get(), p.dtype, {B, p.max_q_len, Hq, D});
  s.tensors.k = TensorRef::contiguous(s.k.get(), kv.k_element, {slabs, slab_tokens, Hkv, D});
  s.tensors.v = TensorRef::contiguous(s.v.get(), kv.v_element, {slabs, slab_tokens, Hkv, D});
  if (!p.kv_cache) return s;
  s.scales = timing_scales(detail::resolve_kv_format(p.kv_format, p.dtype), Hkv, slabs, slab_tokens, D,
                           &s.tensors.k_scales, &s.tensors.v_scales);
  if (kv.channel_keys) {
    const size_t tail_elems = size_t(B * Hkv * detail::kKeyTailRows * D);
    s.k_tail = DeviceBuffer(tail_elems * size_t(detail::element_traits(p.dtype).bits / 8));
    fill_random_device(s.k_tail.get(), tail_elems, p.dtype, seed + 3);
    s.tensors.k_tail = TensorRef::contiguous(s.k_tail.get(), p.dtype, {B, Hkv, detail::kKeyTailRows, D});
  }
  s.seq_lens = DeviceBuffer::from(std::vector<int32_t>(size_t(B), p.max_kv_len));
  s.tensors.seq_lens = TensorRef::contiguous(s.seq_lens.get(), DType::kI32, {B});
  if (p.page_size) s.block_table = shuffled_block_table(B, pages_per_seq, seed, &s.tensors.block_table);
  return s;
}

// The tables' "kv" column: "-" for K/V token tensors, "cache" for a contiguous KV cache, "page N"
// for a paged one.
std::string kv_source(const PrefillProblem& p) {
  if (!p.kv_cache) return "-";
  const std::string source = p.page_size ? "page " + std::to_string(p.page_size) : "cache";
  const KvFormat format = detail::resolve_kv_format(p.kv_format, p.dtype);
  return detail::kv_format_traits(format).quantized ? source + " " + to_string(format) : source;
}

// 4 * D FLOPs per visible (query, key) pair per query head. Causal, bottom-right: Lq*Lk - Lq^2/2
// pairs (half the square when Lq == Lk, as is customary).
double prefill_flops(const PrefillProblem& p) {
  const double lq = p.max_q_len, lk = p.max_kv_len;
  double pairs = p.causal ? std::max(0.0, lq * lk - lq * lq / 2) : lq * lk;
  if (p.window_left >= 0 || p.window_right >= 0) {  // the (query, key) pairs some window shows, exactly
    pairs = 0;
    for (int64_t i = 0; i < p.max_q_len; ++i) {
      const int64_t pos = int64_t(p.max_kv_len) - p.max_q_len + i;
      const int64_t first = p.window_left < 0 ? 0 : std::max<int64_t>(0, pos - p.window_left);
      int64_t end = p.window_right < 0 ? p.max_kv_len : std::min<int64_t>(p.max_kv_len, pos + p.window_right + 1);
      if (p.causal) end = std::min<int64_t>(end, pos + 1);
      pairs += double(std::max<int64_t>(0, end - first));
    }
  }
  return 4.0 * p.batch * p.num_q_heads * p.head_dim * pairs;
}

Status measure_prefill(const PrefillProblem& p, const PlanOptions& options, const char* variant, int replays,
                       Plan* plan, ResultRow* row) {
  DeviceInfo device;
  if (Status s = query_device(0, &device); !s) return s;
  if (Status s = plan_prefill(p, device, options, plan); !s) return s;
  row->flops = prefill_flops(p);
  const double bytes = 2.0 * p.batch * p.head_dim * (2.0 * p.max_q_len * p.num_q_heads + 2.0 * p.max_kv_len * p.num_kv_heads);
  const int sets = sets_for_cold_l2(bytes, 16);
  std::vector<PrefillSet> data;
  for (int i = 0; i < sets; ++i) data.push_back(make_set(p, 500 + 3 * i));
  const Plan& pl = *plan;
  if (Status s = time_rotating_calls(sets, 8, replays, pl,
                                     [&](int set, void* ws, Stream stream) {
                                       return run_prefill(pl, data[set].tensors, ws, pl.workspace_bytes(), stream);
                                     },
                                     &row->timing);
      !s) {
    return s;
  }
  row->case_fields = case_fields(
      {p.batch, p.num_q_heads, p.num_kv_heads, p.max_q_len, p.max_kv_len, p.head_dim, p.dtype, p.causal, p.page_size},
      pl);
  row->case_fields.add("variant", variant).add("kv_cache", p.kv_cache);
  row->case_fields.add("kv_format", to_string(detail::resolve_kv_format(p.kv_format, p.dtype)));
  add_variant_fields(p.window_left, p.window_right, p.softcap, p.sinks, &row->case_fields);
  return Status::success();
}

PrefillProblem row_problem(const SuiteRow& r) {
  PrefillProblem p;
  p.batch = r.batch;
  p.num_q_heads = r.num_q_heads;
  p.num_kv_heads = r.num_kv_heads;
  p.head_dim = r.head_dim;
  p.max_q_len = r.q_len;
  p.max_kv_len = r.kv_len;
  p.causal = r.causal;
  p.dtype = r.dtype;
  p.kv_cache = r.kv_cache;
  p.page_size = r.page_size;
  p.kv_format = r.kv_format;
  return p;
}

int run_rows(const std::vector<PrefillProblem>& problems, const std::vector<Variant>& variants, const CliOptions& o,
             const char* suite) {
  std::printf("%4s %7s %6s %6s %4s %5s %7s %-12s %-15s %-20s %6s %9s %8s %7s\n", "B", "Hq/Hkv", "Lq", "Lk", "D",
              "dtype", "causal", "kv", "variant", "family", "splits", "us", "TFLOP/s", "spread");
  Results results(suite, 0);
  PlanOptions base;
  if (Status s = to_plan_options(o, &base); !s) return print_if_error(s);
  for (const PrefillProblem& p : problems) {
    if (!o.shape_given && results.skip_unbuilt(p.head_dim, p.dtype)) continue;  // a suite on a reduced build
    for (const Variant& v : variants) {
      PlanOptions options = base;
      if (v.strategy != Strategy::kAuto) options.strategy = v.strategy;
      if (v.family[0] != '\0') options.family = v.family;
      Plan plan;
      ResultRow row;
      if (Status s = measure_prefill(p, options, v.name, o.iters, &plan, &row); !s) {
        std::printf("  %s: %s\n", v.name, s.message().c_str());
        // A variant's named family may not serve this row (a head dim, or no sm_90): n/a, not a failure.
        if (!(s.code() == StatusCode::kUnsupported && v.family[0] != '\0')) results.fail();
        continue;
      }
      std::printf("%4d %3d/%-3d %6d %6d %4d %5s %7s %-12s %-15s %-20s %6d %9.1f %8.1f %6.1f%%\n", p.batch,
                  p.num_q_heads, p.num_kv_heads, p.max_q_len, p.max_kv_len, p.head_dim, to_string(p.dtype),
                  p.causal ? "yes" : "no", kv_source(p).c_str(), v.name, plan.family().c_str(), plan.num_splits(),
                  row.timing.us_per_call, row.flops / (row.timing.us_per_call * 1e-6) / 1e12,
                  100 * row.timing.spread);
      std::fflush(stdout);
      results.add(row);
    }
  }
  return results.finish(o.json_path);
}

// The lengths `verify` runs: padded, every sequence at the bounds; varlen, from the bounds down so
// sequences differ.
int verify_q_len(const PrefillProblem& p, int b) {
  return p.varlen ? std::max(0, p.max_q_len - 7 * b) : p.max_q_len;
}
int verify_kv_len(const PrefillProblem& p, int b) {
  return p.varlen ? std::max(0, p.max_kv_len - 5 * b) : p.max_kv_len;
}

// K/V token tensors: testing::PrefillCase.
int verify_over_tokens(const PrefillProblem& p, const Plan& plan, uint64_t seed) {
  testing::PrefillCaseSpec spec;
  spec.problem = p;
  spec.seed = seed;
  for (int b = 0; b < p.batch && p.varlen; ++b) {
    spec.q_lens.push_back(verify_q_len(p, b));
    spec.kv_lens.push_back(verify_kv_len(p, b));
  }
  testing::PrefillCase c = testing::make_prefill_case(spec);
  return run_and_report<testing::DevicePrefillCase>(plan, c, run_prefill, testing::check_prefill, "gpu prefill");
}

// A KV cache (chunked prefill): testing::ChunkCase, the tests' cache (NaN in every slot no sequence
// owns, shuffled pages), each sequence's queries those of its last keys.
int verify_over_cache(const PrefillProblem& p, const Plan& plan, uint64_t seed) {
  testing::ChunkCaseSpec spec;
  DecodeProblem& d = spec.cache;
  d.batch = p.batch;
  d.num_q_heads = p.num_q_heads;
  d.num_kv_heads = p.num_kv_heads;
  d.head_dim = p.head_dim;
  d.max_kv_len = p.max_kv_len;
  d.page_size = p.page_size;
  d.dtype = p.dtype;
  d.kv_format = p.kv_format;
  for (int b = 0; b < p.batch; ++b) {
    spec.chunks.push_back(verify_q_len(p, b));
    spec.seq_lens.push_back(verify_kv_len(p, b));
  }
  spec.causal = p.causal;
  spec.varlen = p.varlen;
  spec.seed = seed;
  testing::ChunkCase c = testing::make_chunk_case(spec);
  return run_and_report<testing::DeviceChunkCase>(plan, c, run_prefill, testing::check_chunk, "gpu chunked prefill");
}

}  // namespace

int gpu_prefill_bench(const CliOptions& o) {
  std::vector<PrefillProblem> problems;
  if (o.shape_given) {
    Formats formats;
    PlanOptions unused;
    if (!parse_formats_and_options(o, &formats, &unused)) return 1;
    problems.push_back(to_prefill_problem(o, formats));
  } else if (o.suite == "variants-prefill") {
    // The prefill half of the variants suite (issue 53's rows), each beside the row it is judged
    // against: causal 16k with a 4k window beside dense causal 16k; softcap 50 over D=128 16k,
    // causal and not, beside the plain rows; GQA 32/8 causal 4k with a 1k window.
    auto add = [&](int batch, int hq, int hkv, int len, bool causal, int window, float cap) {
      PrefillProblem p = row_problem(SuiteRow{batch, hq, hkv, len, len, 128, DType::kBF16, causal});
      p.window_left = window;
      p.softcap = cap;
      problems.push_back(p);
    };
    add(1, 16, 16, 16384, true, -1, 0.f);
    add(1, 16, 16, 16384, true, 4096, 0.f);
    add(1, 16, 16, 16384, true, -1, 50.f);
    add(1, 16, 16, 16384, false, -1, 0.f);
    add(1, 16, 16, 16384, false, -1, 50.f);
    add(4, 32, 8, 4096, true, -1, 0.f);
    add(4, 32, 8, 4096, true, 1024, 0.f);
  } else {
    const int rows = o.suite == "strategies" ? kStrategyRows : int(std::size(kPrefillSuite));
    for (int i = 0; i < rows; ++i) problems.push_back(row_problem(kPrefillSuite[i]));
  }
  if (o.suite == "strategies") {
    return run_rows(problems, std::vector<Variant>(std::begin(kStrategyVariants), std::end(kStrategyVariants)), o,
                    "strategies");
  }
  const char* suite = o.shape_given ? "prefill-single" : (o.suite == "variants-prefill" ? "variants-prefill" : "prefill");
  return run_rows(problems, {kDefaultVariant}, o, suite);
}

int gpu_prefill_verify(const CliOptions& o) {
  Formats formats;
  PlanOptions options;
  if (!parse_formats_and_options(o, &formats, &options)) return 1;
  const PrefillProblem problem = to_prefill_problem(o, formats);
  DeviceInfo device;
  Plan plan;
  Status status = query_device(0, &device);
  if (status) status = plan_prefill(problem, device, options, &plan);
  if (int rc = print_if_error(status)) return rc;
  return problem.kv_cache ? verify_over_cache(problem, plan, o.seed) : verify_over_tokens(problem, plan, o.seed);
}

}  // namespace splitkv::cli
