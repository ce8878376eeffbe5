// `splitkv bench --suite mixed` (docs/BENCHMARKING.md, docs/MIXED_BATCH.md): a serving step's mix of
// prefill chunks, speculative rows and decode rows over one paged cache, timed in the same run three
// ways: as one call (run_prefill over the cache with varlen queries: the mixed step), as the separate
// calls an engine makes today (chunked prefill for the chunks, one decode call per query count,
// captured back to back in one graph; and the same calls side by side on two streams), and each of
// those calls alone.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "api/side_stream.hpp"
#include "bench_harness.hpp"
#include "commands.hpp"
#include "common/formats.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {
namespace {

using testing::DeviceBuffer;

// Issue 54's shapes: 32/8 heads, D = 128, bf16 queries, 16-token pages.
constexpr int kHq = 32, kHkv = 8, kD = 128, kPage = 16;
constexpr DType kDtype = DType::kBF16;
// Sequences with more queries than this are prefill chunks (chunked prefill); the others are decode
// or speculative rows (the decode kernels take 1..16 queries).
constexpr int kMaxDecodeQueries = 16;

// `count` sequences of q_len queries each, their key counts (the new queries' keys included) spread
// evenly over [kv_lo, kv_hi].
struct Group {
  int count, q_len, kv_lo, kv_hi;
};
struct Mix {
  const char* name;
  std::vector<Group> groups;  // decode rows first, as engines order a step
};
const Mix kMixes[] = {
    {"a: 2048-query chunk over 8k + 63 rows 1k-32k", {{63, 1, 1024, 32768}, {1, 2048, 8192 + 2048, 8192 + 2048}}},
    {"b: 8 first chunks of 512 + 120 rows at 4k", {{120, 1, 4096, 4096}, {8, 512, 512, 512}}},
    {"c: 256 rows at 2k + 32 speculative rows of 4 at 8k", {{256, 1, 2048, 2048}, {32, 4, 8192, 8192}}},
    // The two ends: what the mixed route costs a step of chunks only, and one of decode rows only.
    {"e: 4 chunks of 1024 over 4k, no rows", {{4, 1024, 4096, 4096}}},
    {"f: 64 rows at 8k, no chunk", {{64, 1, 8192, 8192}}},
};

int group_kv_len(const Group& g, int i) {
  return g.count == 1 ? g.kv_hi : g.kv_lo + int(int64_t(g.kv_hi - g.kv_lo) * i / (g.count - 1));
}

size_t bytes_of(DType t, int64_t elements) { return size_t(elements) * size_t(detail::element_traits(t).bits) / 8; }

// One step's device data: the paged cache (pages shuffled, each sequence its own), the varlen
// queries and outputs, lengths and block table.
struct StepData {
  int batch = 0, total_q = 0, max_q = 0, max_kv = 0, max_pages = 0;
  std::vector<int32_t> q_lens, kv_lens;
  DeviceBuffer k, v, q, out, cu_q, seq_lens, block_table;
  TimingScales scales;
  TensorRef k_ref, v_ref, k_scales, v_scales;
};

StepData make_step(const Mix& mix, KvFormat format, uint64_t seed) {
  StepData s;
  for (const Group& g : mix.groups) {
    for (int i = 0; i < g.count; ++i) {
      s.q_lens.push_back(g.q_len);
      s.kv_lens.push_back(group_kv_len(g, i));
    }
  }
  s.batch = int(s.q_lens.size());
  s.total_q = std::accumulate(s.q_lens.begin(), s.q_lens.end(), 0);
  s.max_q = *std::max_element(s.q_lens.begin(), s.q_lens.end());
  s.max_kv = *std::max_element(s.kv_lens.begin(), s.kv_lens.end());
  s.max_pages = (s.max_kv + kPage - 1) / kPage;
  int64_t pool = 0;
  for (int n : s.kv_lens) pool += (n + kPage - 1) / kPage;
  std::vector<int32_t> ids(static_cast<size_t>(pool));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
  std::vector<int32_t> table(size_t(s.batch) * s.max_pages, 0);
  size_t next = 0;
  for (int b = 0; b < s.batch; ++b) {
    for (int j = 0; j < (s.kv_lens[size_t(b)] + kPage - 1) / kPage; ++j) table[size_t(b) * s.max_pages + j] = ids[next++];
  }
  std::vector<int32_t> cu(size_t(s.batch) + 1, 0);
  for (int b = 0; b < s.batch; ++b) cu[size_t(b) + 1] = cu[size_t(b)] + s.q_lens[size_t(b)];

  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(format, kDtype));
  const int64_t kv_elems = pool * kPage * kHkv * kD, q_elems = int64_t(s.total_q) * kHq * kD;
  s.k = DeviceBuffer(bytes_of(kv.k_element, kv_elems));
  s.v = DeviceBuffer(bytes_of(kv.v_element, kv_elems));
  s.q = DeviceBuffer(bytes_of(kDtype, q_elems));
  s.out = DeviceBuffer(bytes_of(kDtype, q_elems));
  // Random 16-bit values; a quantized cache takes their bytes as codes (the fill counts 16-bit words).
  fill_random_device(s.k.get(), s.k.bytes() / 2, kv.quantized ? kDtype : kv.k_element, seed + 1);
  fill_random_device(s.v.get(), s.v.bytes() / 2, kv.quantized ? kDtype : kv.v_element, seed + 2);
  fill_random_device(s.q.get(), size_t(q_elems), kDtype, seed + 3);
  s.k_ref = TensorRef::contiguous(s.k.get(), kv.k_element, {pool, kPage, kHkv, kD});
  s.v_ref = TensorRef::contiguous(s.v.get(), kv.v_element, {pool, kPage, kHkv, kD});
  s.scales = timing_scales(detail::resolve_kv_format(format, kDtype), kHkv, pool, kPage, kD, &s.k_scales, &s.v_scales);
  s.cu_q = DeviceBuffer::from(cu);
  s.seq_lens = DeviceBuffer::from(s.kv_lens);
  s.block_table = DeviceBuffer::from(table);
  return s;
}

// A call of the step: its plan, workspace and launch.
struct Call {
  std::string what, family;
  int splits = 0;
  double flops = 0, bytes = 0;  // prefill calls: FLOPs; decode calls: bytes read
  Plan plan;
  DeviceBuffer workspace;
  std::function<Status(void* workspace, Stream stream)> run;
};

Status prepare(Call* c) {
  c->family = c->plan.family();
  c->splits = c->plan.num_splits();
  c->workspace = DeviceBuffer(c->plan.workspace_bytes());
  return prepare_workspace(c->plan, c->workspace.get(), c->workspace.bytes(), nullptr);
}

template <class T>
T* offset(const DeviceBuffer& b, int64_t elements) {
  return static_cast<T*>(b.get()) + elements;
}
char* offset_bytes(const DeviceBuffer& b, DType t, int64_t elements) {
  return static_cast<char*>(b.get()) + bytes_of(t, elements);
}

// 4 D FLOPs per visible (query, key) pair per query head; causal bottom-right.
double chunk_flops(int q_len, int kv_len) {
  const double lq = q_len, lk = kv_len;
  return 4.0 * kHq * kD * std::max(0.0, lq * lk - lq * (lq - 1) / 2);
}

// Sequences of the step served by one chunked-prefill call: `batch` of them, at most max_q queries
// (varlen by cu_q; `tokens` rows of q and out) and max_kv keys (their lengths and block table rows).
struct PrefillSpan {
  int batch, max_q, max_kv;
  int64_t tokens;
  void *q, *out, *cu_q;
  TensorRef lens, table;
};

Status prefill_call(const StepData& s, const PrefillSpan& span, KvFormat format, const DeviceInfo& device,
                    const char* what, Call* c, const PlanOptions& options = PlanOptions{}) {
  PrefillProblem p;
  p.batch = span.batch;
  p.num_q_heads = kHq;
  p.num_kv_heads = kHkv;
  p.head_dim = kD;
  p.max_q_len = span.max_q;
  p.max_kv_len = span.max_kv;
  p.varlen = true;
  p.causal = true;
  p.dtype = kDtype;
  p.kv_format = format;
  p.kv_cache = true;
  p.page_size = kPage;
  if (Status st = plan_prefill(p, device, options, &c->plan); !st) return st;
  PrefillTensors t;
  t.q = TensorRef::contiguous(span.q, kDtype, {span.tokens, kHq, kD});
  t.out = TensorRef::contiguous(span.out, kDtype, {span.tokens, kHq, kD});
  t.k = s.k_ref;
  t.v = s.v_ref;
  t.k_scales = s.k_scales;
  t.v_scales = s.v_scales;
  t.cu_seqlens_q = TensorRef::contiguous(span.cu_q, DType::kI32, {span.batch + 1});
  t.seq_lens = span.lens;
  t.block_table = span.table;
  c->what = what;
  const Plan& plan = c->plan;
  c->run = [t, &plan](void* ws, Stream stream) { return run_prefill(plan, t, ws, plan.workspace_bytes(), stream); };
  return prepare(c);
}

// The suite's name for the one call: without the route, on it, or on it with its parts in series.
const char* mixed_variant(bool route, bool serial) {
  return !route ? "mixed" : serial ? "mixed route, serial" : "mixed route";
}

// The whole step as one call: chunked prefill over the cache, every sequence varlen; with `route`,
// on the mixed route (PlanTuning::mixed_route: the short rows on the decode kernels beside it;
// with `serial`, after it: PlanTuning::mixed_route_serial).
Status mixed_call(const StepData& s, KvFormat format, const DeviceInfo& device, Call* c, bool route = false,
                  bool serial = false) {
  for (int b = 0; b < s.batch; ++b) c->flops += chunk_flops(s.q_lens[size_t(b)], s.kv_lens[size_t(b)]);
  const PrefillSpan span{s.batch, s.max_q, s.max_kv, s.total_q, s.q.get(), s.out.get(), s.cu_q.get(),
                         TensorRef::contiguous(s.seq_lens.get(), DType::kI32, {s.batch}),
                         TensorRef::contiguous(s.block_table.get(), DType::kI32, {s.batch, s.max_pages})};
  PlanOptions options;
  options.tuning.mixed_route = route;
  options.tuning.mixed_route_serial = serial;
  return prefill_call(s, span, format, device, mixed_variant(route, serial), c, options);
}

// One group of sequences [first, first + g.count), its queries from token `token0`, as its own call:
// chunked prefill for chunks, decode for rows. cu_q: the group's own cu_seqlens_q (chunks only).
Status part_call(const StepData& s, const Group& g, int first, int token0, KvFormat format, const DeviceInfo& device,
                 DeviceBuffer* cu_q, Call* c) {
  const int kv_hi = std::max(g.kv_lo, g.kv_hi);
  const TensorRef lens = TensorRef::contiguous(offset<int32_t>(s.seq_lens, first), DType::kI32, {g.count});
  const TensorRef table =
      TensorRef::contiguous(offset<int32_t>(s.block_table, int64_t(first) * s.max_pages), DType::kI32,
                            {g.count, s.max_pages});
  void* q = offset_bytes(s.q, kDtype, int64_t(token0) * kHq * kD);
  void* out = offset_bytes(s.out, kDtype, int64_t(token0) * kHq * kD);
  const detail::KvFormatTraits kv = detail::kv_format_traits(detail::resolve_kv_format(format, kDtype));
  const bool chunks = g.q_len > kMaxDecodeQueries;
  for (int i = 0; i < g.count; ++i) {
    const int n = group_kv_len(g, i);
    if (chunks) {
      c->flops += chunk_flops(g.q_len, n);
    } else {
      c->bytes += double(n) * kHkv * kD *
                  (detail::element_traits(kv.k_element).bits + detail::element_traits(kv.v_element).bits) / 8;
    }
  }
  if (chunks) {
    std::vector<int32_t> cu(size_t(g.count) + 1);
    for (int i = 0; i <= g.count; ++i) cu[size_t(i)] = i * g.q_len;
    *cu_q = DeviceBuffer::from(cu);
    const PrefillSpan span{g.count, g.q_len, kv_hi, int64_t(g.count) * g.q_len, q, out, cu_q->get(), lens, table};
    PlanOptions options;
    options.tuning.mixed_route = false;  // chunks alone: the chunked-prefill call, no decode rows to route
    return prefill_call(s, span, format, device, "chunks", c, options);
  }
  DecodeProblem p;
  p.batch = g.count;
  p.num_q_heads = kHq;
  p.num_kv_heads = kHkv;
  p.head_dim = kD;
  p.q_len = g.q_len;
  p.max_kv_len = kv_hi;
  p.page_size = kPage;
  p.causal = g.q_len > 1;
  p.dtype = kDtype;
  p.kv_format = format;
  if (Status st = plan_decode(p, device, PlanOptions{}, &c->plan); !st) return st;
  DecodeTensors t;
  t.q = TensorRef::contiguous(q, kDtype, {g.count, g.q_len, kHq, kD});
  t.out = TensorRef::contiguous(out, kDtype, {g.count, g.q_len, kHq, kD});
  t.k = s.k_ref;
  t.v = s.v_ref;
  t.k_scales = s.k_scales;
  t.v_scales = s.v_scales;
  t.seq_lens = lens;
  t.block_table = table;
  c->what = g.q_len == 1 ? "decode rows" : "speculative rows";
  const Plan& plan = c->plan;
  c->run = [t, &plan](void* ws, Stream stream) { return run_decode(plan, t, ws, plan.workspace_bytes(), stream); };
  return prepare(c);
}

// Times back-to-back launches of `calls` (in order, each with its own workspace) in one graph.
Status time_calls(const std::vector<Call*>& calls, int replays, GraphTiming* timing) {
  Status status = Status::success();
  auto enqueue = [&](int, void* stream) {
    for (Call* c : calls) {
      status = c->run(c->workspace.get(), static_cast<Stream>(stream));
      if (!status.ok()) return false;
    }
    return true;
  };
  return time_graph_status(enqueue, status, 4, replays, timing);
}

// The separate calls side by side: the chunks' calls on a second stream of the device's greatest
// priority (forked from the capture stream by an event and joined back), the row calls on the
// capture stream, as the mixed route runs its parts. Against the back-to-back row it shows what
// overlap two streams give the parts at all, each with its own best plan.
Status time_calls_side_by_side(const std::vector<Call*>& calls, int replays, GraphTiming* timing) {
  Status status = Status::success();
  auto enqueue = [&](int, void* stream_ptr) {
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    detail::SideStream side;  // the mixed route's own side stream: the same fork, priority and join
    status = detail::fork_side_stream(stream, &side);
    for (Call* c : calls) {  // the chunks first, on the side stream
      if (status.ok() && c->what == "chunks") status = c->run(c->workspace.get(), side.stream);
    }
    for (Call* c : calls) {
      if (status.ok() && c->what != "chunks") status = c->run(c->workspace.get(), stream);
    }
    if (status.ok()) status = detail::join_side_stream(stream, side);
    return status.ok();
  };
  return time_graph_status(enqueue, status, 4, replays, timing);
}

// Host time of one eager call (the enqueue alone, outside any graph): bursts of kEagerCalls calls on
// one stream, synchronized between bursts so the launch queue never fills; the best burst's mean.
// Issue 54's eager target compares the mixed call's with a decode call's. NaN where a call fails.
double eager_host_us(Call* c) {
  constexpr int kEagerCalls = 20, kBursts = 5;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return std::nan("");
  double best = INFINITY;
  for (int burst = 0; burst <= kBursts; ++burst) {  // burst 0 warms up
    cudaStreamSynchronize(stream);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kEagerCalls; ++i) {
      if (!c->run(c->workspace.get(), static_cast<Stream>(stream)).ok()) best = std::nan("");
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (burst > 0) best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / kEagerCalls);
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  return best;
}

}  // namespace

int gpu_mixed_bench(const CliOptions& o) {
  DeviceInfo device;
  if (int rc = print_if_error(query_device(0, &device))) return rc;
  Results results("mixed", 0);
  if (results.skip_unbuilt(kD, kDtype)) return results.finish(o.json_path);
  std::printf("%-52s %-5s %-16s %-22s %6s %9s %9s\n", "mix", "KV", "call", "family", "splits", "us", "rate");
  // SPLITKV_MIXED_ONLY=<letters>: only those steps (e.g. one step's kernels under ncu).
  const char* only = std::getenv("SPLITKV_MIXED_ONLY");
  for (const KvFormat format : {KvFormat::kNative, KvFormat::kFP8E4M3}) {
    for (const Mix& mix : kMixes) {
      if (only != nullptr && *only != '\0' && std::strchr(only, mix.name[0]) == nullptr) continue;
      StepData s = make_step(mix, format, 77);
      const std::string kv_name = to_string(detail::resolve_kv_format(format, kDtype));
      auto report = [&](const std::string& variant, const Call* c, const GraphTiming& t, double flops,
                        double bytes) {
        const double sec = t.us_per_call * 1e-6;
        const std::string rate = bytes > 0 ? std::to_string(int(bytes / sec / 1e9)) + " GB/s"
                                 : flops > 0 ? std::to_string(int(flops / sec / 1e12)) + " TF/s"
                                             : "";
        std::printf("%-52s %-5s %-16s %-22s %6d %9.1f %9s\n", mix.name, kv_name.c_str(), variant.c_str(),
                    c ? c->family.c_str() : "-", c ? c->splits : 0, t.us_per_call, rate.c_str());
        std::fflush(stdout);
        ResultRow row;
        row.case_fields.add("mix", mix.name)
            .add("B", int64_t(s.batch))
            .add("Hq", int64_t(kHq))
            .add("Hkv", int64_t(kHkv))
            .add("D", int64_t(kD))
            .add("dtype", to_string(kDtype))
            .add("page_size", int64_t(kPage))
            .add("kv_format", kv_name)
            .add("tokens", int64_t(s.total_q))
            .add("variant", variant)
            .add("family", c ? c->family : std::string("-"))
            .add("splits", int64_t(c ? c->splits : 0));
        row.timing = t;
        row.flops = flops;
        row.bytes = bytes;
        results.add(row);
      };
      Call mixed;
      if (Status st = mixed_call(s, format, device, &mixed); !st) {
        std::printf("  %s, mixed: %s\n", mix.name, st.message().c_str());
        results.fail();
        continue;
      }
      std::vector<Call> parts(mix.groups.size());
      std::vector<DeviceBuffer> cu_bufs(mix.groups.size());
      int first = 0, token0 = 0;
      bool ok = true;
      for (size_t i = 0; i < mix.groups.size() && ok; ++i) {
        if (Status st = part_call(s, mix.groups[i], first, token0, format, device, &cu_bufs[i], &parts[i]); !st) {
          std::printf("  %s, part %zu: %s\n", mix.name, i, st.message().c_str());
          ok = false;
        }
        first += mix.groups[i].count;
        token0 += mix.groups[i].count * mix.groups[i].q_len;
      }
      if (!ok) {
        results.fail();
        continue;
      }
      GraphTiming t;
      if (Status st = time_calls({&mixed}, o.iters, &t); !st) {
        std::printf("  %s: %s\n", mix.name, st.message().c_str());
        results.fail();
        continue;
      }
      report(mixed_variant(false, false), &mixed, t, mixed.flops, 0);
      double route_host_us = std::nan("");
      for (const bool serial : {false, true}) {
        Call routed;
        const char* what = mixed_variant(true, serial);
        if (Status st = mixed_call(s, format, device, &routed, true, serial); !st) {
          std::printf("  %s, %s: %s\n", mix.name, what, st.message().c_str());
          results.fail();
        } else if (Status st2 = time_calls({&routed}, o.iters, &t); !st2) {
          std::printf("  %s, %s: %s\n", mix.name, what, st2.message().c_str());
          results.fail();
        } else {
          report(what, &routed, t, routed.flops, 0);
          if (!serial) route_host_us = eager_host_us(&routed);
        }
      }
      std::vector<Call*> all;
      for (Call& c : parts) all.push_back(&c);
      if (Status st = time_calls(all, o.iters, &t); !st) {
        std::printf("  %s: %s\n", mix.name, st.message().c_str());
        results.fail();
        continue;
      }
      report("separate", nullptr, t, 0, 0);
      if (Status st = time_calls_side_by_side(all, o.iters, &t); !st) {
        std::printf("  %s, side by side: %s\n", mix.name, st.message().c_str());
        results.fail();
      } else {
        report("separate, side by side", nullptr, t, 0, 0);
      }
      for (Call& c : parts) {
        if (Status st = time_calls({&c}, o.iters, &t); !st) {
          std::printf("  %s: %s\n", mix.name, st.message().c_str());
          results.fail();
          continue;
        }
        report("part: " + c.what, &c, t, c.flops, c.bytes);
      }
      // The host's side of an eager call: the step's call on the route against each part's call.
      std::printf("  eager host us per call: mixed route %.1f, mixed %.1f", route_host_us, eager_host_us(&mixed));
      for (Call& c : parts) std::printf(", part %s %.1f", c.what.c_str(), eager_host_us(&c));
      std::printf("\n");
    }
  }
  return results.finish(o.json_path);
}

}  // namespace splitkv::cli
