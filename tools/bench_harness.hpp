// The flow `splitkv bench` and `splitkv verify` share for every problem kind: input sets rotated
// so every call starts with a cold L2, CUDA-graph replay timing, result rows and the results JSON
// (docs/BENCHMARKING.md), and the report of a verification against the fp64 reference.
#pragma once

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_timing.hpp"
#include "splitkv/splitkv.hpp"
#include "testing/compare.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {

// Input sets of `bytes_per_set` whose total reaches 1 GiB (the H200's L2 is 60 MB), clamped to
// [1, max_sets].
int sets_for_cold_l2(double bytes_per_set, int max_sets);

// time_graph(enqueue, calls, replays) into *timing, as a Status: where the graph fails, the
// enqueue's own `status` (which it sets and returns false on) if that failed, else the CUDA error.
Status time_graph_status(const std::function<bool(int, void*)>& enqueue, const Status& status, int calls, int replays,
                         GraphTiming* timing);

// Times back-to-back calls run(set, workspace, stream) of `plan` rotating over `sets` input sets,
// at least `min_calls` calls per graph replay, in one workspace of plan.workspace_bytes prepared for
// the plan (prepare_workspace).
Status time_rotating_calls(int sets, int min_calls, int replays, const Plan& plan,
                           const std::function<Status(int set, void* workspace, Stream stream)>& run,
                           GraphTiming* timing);
// The same for calls without a plan or workspace (a peer's kernels).
Status time_rotating_calls(int sets, int min_calls, int replays, const std::function<Status(int set, Stream stream)>& run,
                           GraphTiming* timing);

// A JSON object built field by field (the "case" of a result row).
class JsonObject {
 public:
  JsonObject& add(const char* key, int64_t value);
  JsonObject& add(const char* key, double value);
  JsonObject& add(const char* key, bool value);
  JsonObject& add(const char* key, const std::string& value);
  JsonObject& add(const char* key, const char* value) { return add(key, std::string(value)); }
  std::string str() const { return "{" + body_.str() + "}"; }

 private:
  std::ostringstream& next(const char* key);
  std::ostringstream body_;
};

// The case fields every suite row starts with (docs/BENCHMARKING.md, results format).
struct CaseShape {
  int batch, num_q_heads, num_kv_heads, q_len, kv_len, head_dim;
  DType dtype;
  bool causal;
  int page_size;
};
JsonObject case_fields(const CaseShape& shape, const Plan& plan);
// The attention variants of a row (docs/VARIANTS.md), added only when some is on.
void add_variant_fields(int window_left, int window_right, float softcap, bool sinks, JsonObject* fields);

struct ResultRow {
  JsonObject case_fields;
  GraphTiming timing;
  double bytes = 0;  // per call, moved through device memory (0: not reported)
  double flops = 0;  // per call
};

// The rows of one suite run and the file they go to.
class Results {
 public:
  Results(std::string suite, double ceiling_read_gbps) : suite_(std::move(suite)), ceiling_(ceiling_read_gbps) {}
  void add(const ResultRow& row);
  void fail() { ++failures_; }
  // A suite row of a head dim or Q/O type this build did not compile (SPLITKV_HEAD_DIMS,
  // SPLITKV_DTYPES): says so and counts it as skipped, not failed. False when the build has it.
  bool skip_unbuilt(int head_dim, DType dtype);
  // {"suite", "date", "gpu", "commit", "ceiling_read_gbps" (when measured), "skipped_rows" (when
  // any), "rows": [...]}; nothing when path is empty. Returns the exit code of the run (1 when a row
  // failed; skipped rows do not fail it).
  int finish(const std::string& path) const;

 private:
  std::string suite_;
  double ceiling_;
  std::vector<std::string> rows_;
  int failures_ = 0;
  int skipped_ = 0;
};

// Prints the plan and the comparison; returns the exit code.
int report_verification(const Plan& plan, const testing::Comparison& cmp, const char* what);

// Prints a status to stderr and returns 1 when it is an error; 0 otherwise.
int print_if_error(const Status& status);

// `verify`'s tail: runs the plan on the device copy of test case c (run: run_decode or run_prefill),
// brings the outputs back and reports check(c), the comparison with the fp64 reference.
template <class DeviceCase, class Case, class Tensors, class Check>
int run_and_report(const Plan& plan, Case& c,
                   Status (*run)(const Plan&, const Tensors&, void*, size_t, Stream), Check check, const char* what) {
  DeviceCase dev(c);
  testing::DeviceBuffer workspace(plan.workspace_bytes());
  if (int rc = print_if_error(prepare_workspace(plan, workspace.get(), workspace.bytes(), nullptr))) return rc;
  if (int rc = print_if_error(run(plan, dev.tensors, workspace.get(), workspace.bytes(), nullptr))) return rc;
  dev.download_outputs(c);
  return report_verification(plan, check(c), what);
}

// A block table [batch, pages_per_seq] giving each sequence its own pages of a pool of
// batch * pages_per_seq, in a shuffled order: the benchmarks' paged caches. *table describes it.
testing::DeviceBuffer shuffled_block_table(int64_t batch, int64_t pages_per_seq, uint64_t seed, TensorRef* table);

// K and V scales of a quantized cache of `slabs` pages (or sequences) of `slab_tokens` tokens, for
// timing: FP8 1.0 per KV head; INT (scale, min) = (1/64, -2) for every token (finite, so kernels do
// their ordinary work). Nothing for a 16-bit cache.
struct TimingScales {
  testing::DeviceBuffer k, v;
};
// head_dim: the row length of a *_kc cache's key group scales (fp16 [slabs, Hkv, groups, 2 D]).
TimingScales timing_scales(KvFormat format, int64_t num_kv_heads, int64_t slabs, int64_t slab_tokens,
                           int64_t head_dim, TensorRef* k_scales, TensorRef* v_scales);

}  // namespace splitkv::cli
