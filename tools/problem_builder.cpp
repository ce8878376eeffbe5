#include "problem_builder.hpp"

#include <cstdio>

namespace splitkv::cli {

Status to_dtype(const std::string& name, DType* dtype) {
  if (name == "bf16") {
    *dtype = DType::kBF16;
  } else if (name == "fp16") {
    *dtype = DType::kF16;
  } else {
    return Status::invalid("--dtype", "fp16 or bf16", name);
  }
  return Status::success();
}

Status to_kv_format(const std::string& name, KvFormat* format) {
  const std::pair<const char*, KvFormat> names[] = {
      {"native", KvFormat::kNative}, {"fp16", KvFormat::kF16},   {"bf16", KvFormat::kBF16}, {"fp8", KvFormat::kFP8E4M3},
      {"int8", KvFormat::kInt8},     {"int4", KvFormat::kInt4}, {"k8v4", KvFormat::kK8V4},
      {"int8_kc", KvFormat::kInt8Kc}, {"int4_kc", KvFormat::kInt4Kc}, {"k8v4_kc", KvFormat::kK8V4Kc}};
  for (const auto& [text, value] : names) {
    if (name == text) {
      *format = value;
      return Status::success();
    }
  }
  return Status::invalid("--kv-format", "native, fp16, bf16, fp8, int8, int4 or k8v4", name);
}

Status to_plan_options(const CliOptions& o, PlanOptions* options) {
  PlanOptions p;
  if (o.strategy == "auto") {
    p.strategy = Strategy::kAuto;
  } else if (o.strategy == "split-q") {
    p.strategy = Strategy::kSplitQ;
  } else if (o.strategy == "split-kv") {
    p.strategy = Strategy::kSplitKV;
  } else if (o.strategy == "split-v") {
    p.strategy = Strategy::kSplitV;
  } else if (o.strategy == "two-pass") {
    p.strategy = Strategy::kTwoPass;
  } else {
    return Status::invalid("--strategy", "auto, split-q, split-kv, split-v or two-pass", o.strategy);
  }
  p.family = o.family;
  p.num_splits = o.num_splits;
  p.max_splits = o.max_splits;
  p.split_tokens = o.split_tokens;
  p.merge = o.merge;
  p.atomic_reference_lse = o.atomic_reference_lse;
  p.tuning = o.tuning;
  *options = p;
  return Status::success();
}

bool parse_formats_and_options(const CliOptions& o, Formats* formats, PlanOptions* options) {
  Status status = to_dtype(o.dtype, &formats->dtype);
  if (status) status = to_kv_format(o.kv_format, &formats->kv_format);
  if (status) status = to_plan_options(o, options);
  if (!status) std::fprintf(stderr, "%s\n", status.message().c_str());
  return status.ok();
}

DecodeProblem to_decode_problem(const CliOptions& o, const Formats& formats) {
  DecodeProblem p;
  p.batch = o.batch;
  p.num_q_heads = o.num_q_heads;
  p.num_kv_heads = o.num_kv_heads;
  p.head_dim = o.head_dim;
  p.q_len = o.q_len;
  p.max_kv_len = o.kv_len;
  p.page_size = o.page_size;
  p.causal = o.causal;
  p.dtype = formats.dtype;
  p.kv_format = formats.kv_format;
  p.window_left = o.window_left;
  p.window_right = o.window_right;
  p.softcap = o.softcap;
  p.sinks = o.sinks;
  p.tree_mask = o.tree_mask;
  return p;
}

PrefillProblem to_prefill_problem(const CliOptions& o, const Formats& formats) {
  PrefillProblem p;
  p.batch = o.batch;
  p.num_q_heads = o.num_q_heads;
  p.num_kv_heads = o.num_kv_heads;
  p.head_dim = o.head_dim;
  p.max_q_len = o.q_len;
  p.max_kv_len = o.kv_len;
  p.varlen = o.varlen;
  p.causal = o.causal;
  p.dtype = formats.dtype;
  p.kv_format = formats.kv_format;
  // Only a cache has pages, so --page-size asks for a paged one; the library checks the size.
  p.kv_cache = o.kv_cache || o.page_size != 0;
  p.page_size = o.page_size;
  p.window_left = o.window_left;
  p.window_right = o.window_right;
  p.softcap = o.softcap;
  return p;
}

}  // namespace splitkv::cli
