#include "bench_harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>

#include "common/formats.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {

int sets_for_cold_l2(double bytes_per_set, int max_sets) {
  return int(std::clamp(std::ceil(double(1ll << 30) / bytes_per_set), 1.0, double(max_sets)));
}

Status time_graph_status(const std::function<bool(int, void*)>& enqueue, const Status& status, int calls, int replays,
                         GraphTiming* timing) {
  try {
    *timing = time_graph(enqueue, calls, replays);
  } catch (const std::exception& e) {
    return status.ok() ? Status(StatusCode::kCudaError, "", e.what()) : status;
  }
  return Status::success();
}

Status time_rotating_calls(int sets, int min_calls, int replays, const std::function<Status(int, Stream)>& run,
                           GraphTiming* timing) {
  Status status = Status::success();
  auto enqueue = [&](int call, void* stream) {
    status = run(call % sets, static_cast<Stream>(stream));
    return status.ok();
  };
  const int calls = sets * std::max(1, (min_calls + sets - 1) / sets);
  return time_graph_status(enqueue, status, calls, replays, timing);
}

Status time_rotating_calls(int sets, int min_calls, int replays, const Plan& plan,
                           const std::function<Status(int, void*, Stream)>& run, GraphTiming* timing) {
  testing::DeviceBuffer workspace(plan.workspace_bytes());
  if (Status s = prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr); !s.ok()) return s;
  return time_rotating_calls(
      sets, min_calls, replays, [&](int set, Stream stream) { return run(set, workspace.get(), stream); }, timing);
}

std::ostringstream& JsonObject::next(const char* key) {
  if (body_.tellp() > 0) body_ << ", ";
  body_ << "\"" << key << "\": ";
  return body_;
}
JsonObject& JsonObject::add(const char* key, int64_t value) { return next(key) << value, *this; }
JsonObject& JsonObject::add(const char* key, double value) { return next(key) << value, *this; }
JsonObject& JsonObject::add(const char* key, bool value) { return next(key) << (value ? "true" : "false"), *this; }
JsonObject& JsonObject::add(const char* key, const std::string& value) {
  return next(key) << "\"" << value << "\"", *this;
}

JsonObject case_fields(const CaseShape& c, const Plan& plan) {
  JsonObject o;
  o.add("B", int64_t(c.batch))
      .add("Hq", int64_t(c.num_q_heads))
      .add("Hkv", int64_t(c.num_kv_heads))
      .add("Lq", int64_t(c.q_len))
      .add("Lk", int64_t(c.kv_len))
      .add("D", int64_t(c.head_dim))
      .add("dtype", to_string(c.dtype))
      .add("causal", c.causal)
      .add("page_size", int64_t(c.page_size))
      .add("family", plan.family())
      .add("strategy", to_string(plan.strategy()))
      .add("splits", int64_t(plan.num_splits()));
  return o;
}

void add_variant_fields(int window_left, int window_right, float softcap, bool sinks, JsonObject* fields) {
  if (window_left < 0 && window_right < 0 && softcap <= 0.f && !sinks) return;
  fields->add("window_left", int64_t(window_left))
      .add("window_right", int64_t(window_right))
      .add("softcap", double(softcap))
      .add("sinks", sinks);
}

void Results::add(const ResultRow& row) {
  const double seconds = row.timing.us_per_call * 1e-6;
  std::ostringstream s;
  s << "{\"case\": " << row.case_fields.str() << ", \"us\": " << row.timing.us_per_call;
  if (row.bytes > 0) s << ", \"gbps\": " << row.bytes / seconds / 1e9;
  if (row.flops > 0) s << ", \"tflops\": " << row.flops / seconds / 1e12;
  s << ", \"spread\": " << row.timing.spread << "}";
  rows_.push_back(s.str());
}

bool Results::skip_unbuilt(int head_dim, DType dtype) {
  const std::vector<int> dims = compiled_head_dims();
  const bool built = std::find(dims.begin(), dims.end(), head_dim) != dims.end() && dtype_compiled(dtype);
  if (built) return false;
  std::printf("  skipped: D=%d %s is not in this build (SPLITKV_HEAD_DIMS / SPLITKV_DTYPES)\n", head_dim,
              to_string(dtype));
  ++skipped_;
  return true;
}

int Results::finish(const std::string& path) const {
  if (skipped_ > 0) std::printf("%d row(s) skipped: not in this build\n", skipped_);
  if (!path.empty()) {
    std::ofstream json(path);
    const char* commit = std::getenv("SPLITKV_COMMIT");
    json << "{\"suite\": \"" << suite_ << "\", \"date\": \"" << today() << "\", \"gpu\": \"" << gpu_name()
         << "\", \"commit\": \"" << (commit ? commit : "unknown") << "\"";
    if (ceiling_ > 0) json << ", \"ceiling_read_gbps\": " << ceiling_;
    if (skipped_ > 0) json << ", \"skipped_rows\": " << skipped_;
    json << ",\n \"rows\": [\n";
    for (size_t i = 0; i < rows_.size(); ++i) json << (i ? ",\n  " : "  ") << rows_[i];
    json << "]}\n";
  }
  return failures_ == 0 ? 0 : 1;
}

int report_verification(const Plan& plan, const testing::Comparison& cmp, const char* what) {
  std::printf("%s", describe(plan).c_str());
  std::printf("%s vs fp64 reference: %s\n", what, cmp.summary().c_str());
  return cmp.passed ? 0 : 1;
}

int print_if_error(const Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s\n", status.message().c_str());
  return 1;
}

testing::DeviceBuffer shuffled_block_table(int64_t batch, int64_t pages_per_seq, uint64_t seed, TensorRef* table) {
  std::vector<int32_t> ids(static_cast<size_t>(batch * pages_per_seq));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
  testing::DeviceBuffer buffer = testing::DeviceBuffer::from(ids);
  *table = TensorRef::contiguous(buffer.get(), DType::kI32, {batch, pages_per_seq});
  return buffer;
}

TimingScales timing_scales(KvFormat format, int64_t num_kv_heads, int64_t slabs, int64_t slab_tokens,
                           int64_t head_dim, TensorRef* k_scales, TensorRef* v_scales) {
  const detail::KvFormatTraits kv = detail::kv_format_traits(format);
  const int64_t Hkv = num_kv_heads;
  TimingScales s;
  for (auto [buffer, ref] : {std::pair{&s.k, k_scales}, {&s.v, v_scales}}) {
    const detail::KvScales kind = ref == k_scales ? kv.k_scales() : kv.scales;
    if (kind == detail::KvScales::kPerChannelGroup) {  // scale[D] then min[D] per 64-slot group
      const int64_t D = head_dim, groups = (slab_tokens + detail::kKeyGroup - 1) / detail::kKeyGroup;
      std::vector<uint16_t> rows(size_t(slabs * Hkv * groups * 2 * D));
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = (i / size_t(D)) % 2 == 0 ? 0x2400 : 0xc000;  // 1/64, -2
      *buffer = testing::DeviceBuffer::from(rows);
      *ref = TensorRef::contiguous(buffer->get(), DType::kF16, {slabs, Hkv, groups, 2 * D});
    } else if (kind == detail::KvScales::kPerHead) {
      *buffer = testing::DeviceBuffer::from(std::vector<float>(size_t(Hkv), 1.f));
      *ref = TensorRef::contiguous(buffer->get(), DType::kF32, {Hkv});
    } else if (kind == detail::KvScales::kPerTokenPair) {
      std::vector<uint16_t> pairs(size_t(slabs * Hkv * slab_tokens * 2));
      for (size_t i = 0; i < pairs.size(); i += 2) pairs[i] = 0x2400, pairs[i + 1] = 0xc000;  // 1/64, -2
      *buffer = testing::DeviceBuffer::from(pairs);
      *ref = TensorRef::contiguous(buffer->get(), DType::kF16, {slabs, Hkv, slab_tokens, 2});
    }
  }
  return s;
}

}  // namespace splitkv::cli
