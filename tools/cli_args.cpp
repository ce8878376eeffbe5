#include "cli_args.hpp"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "plan/plan_options_table.hpp"

namespace splitkv::cli {
namespace {

bool parse_int(const std::string& text, int* value) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') return false;
  *value = static_cast<int>(v);
  return true;
}

bool parse_float(const std::string& text, float* value) {
  char* end = nullptr;
  *value = std::strtof(text.c_str(), &end);
  return !text.empty() && *end == '\0';
}

}  // namespace

void print_usage() {
  std::printf(
      "usage: splitkv <plan|verify|bench|families|help> [options]\n"
      "  plan       print the plan (family, splits, grid, workspace)\n"
      "  verify     run once and compare with the fp64 reference\n"
      "  bench      time one shape or a suite (CUDA graphs, cold L2)\n"
      "  families   list the kernel families and what this build compiled\n"
      "  --mode decode|prefill     problem kind (default decode)\n"
      "  -b, --batch N             sequences (default 1)\n"
      "  --hq N, --hkv N           query / KV heads (default 32 / 8)\n"
      "  -d, --head-dim N          64, 128 or 256 (default 128)\n"
      "  --lq N                    decode: queries per sequence; prefill: query length\n"
      "  --lk N                    decode: max KV length; prefill: key length (default 4096)\n"
      "  --dtype fp16|bf16         Q/O type (default bf16)\n"
      "  --kv-format F             KV cache format: native (the dtype), fp16, bf16, fp8, int8, int4, k8v4,\n"
      "                            int8_kc, int4_kc, k8v4_kc (keys per channel)\n"
      "                            (default native; quantized formats: decode, and prefill over --kv-cache)\n"
      "  --page-size N             paged KV with pages of N tokens (0 = contiguous); prefill: implies --kv-cache\n"
      "  --kv-head-major           decode: the cache stored head-major, [B or pages, Hkv, tokens, D] in memory\n"
      "                            (described by strides), instead of token-major [B or pages, tokens, Hkv, D]\n"
      "  --kv-cache                prefill: K/V from a KV cache of Lk keys per sequence, queries at the last Lq\n"
      "                            (chunked prefill; contiguous, or paged with --page-size)\n"
      "  --causal, --varlen        causal mask (bottom-right); prefill varlen packing\n"
      "  --splits auto|N           KV splits (default auto)\n"
      "  --max-splits N            cap on splits (CUDA-graph bound)\n"
      "  --split-tokens N          batch-invariant split size in tokens\n"
      "  --merge M                 decode: how splits merge: auto (the planner: the combine kernel, or\n"
      "                            clusters on sm_90 where measured faster), combine-kernel, cluster (sm_90),\n"
      "                            fused (each tile's last split block), atomic (nondeterministic;\n"
      "                            --atomic-reference-lse X, default 0)\n"
      "  --window L[,R]            sliding window: a query at position p sees keys p-L..p+R (-1: unbounded;\n"
      "                            default -1,-1); --softcap X: scores X*tanh(s/X); --sinks: a random sink\n"
      "                            logit per query head; --tree (decode): a random draft tree over the\n"
      "                            q_len queries (docs/VARIANTS.md; GPU: all four in decode, window and\n"
      "                            softcap in prefill)\n"
      "  --l2-prefetch-keys N      decode (sm_90): keys of its split each block prefetches into L2 before\n"
      "                            its PDL wait (-1: the planner's rule, the default; 0: none)\n"
      "  --strategy S              auto|split-q|split-kv|split-v|two-pass\n"
      "  --family NAME             force a kernel family (see `splitkv families`)\n"
      "  --iters N                 timed iterations (default 20; on the GPU: graph replays per timing round)\n"
      "  --suite S                 bench: decode|prefill|strategies|sweep|quant|variants|variants-prefill|mixed (GPU)\n"
      "  --backend auto|gpu|cpu    where bench/verify run (default auto)\n"
      "  --sms N                   plan: SM count of the device to plan for\n"
      "  --seed N                  random inputs\n"
      "  --json PATH               write results as JSON\n"
      "The planner's rules, each on by default (docs/TUNING.md), turned off by:\n");
  for (const plan::TuningSwitch& t : plan::kTuningSwitches) std::printf("  %-25s %s\n", t.flag, t.help);
  std::printf("Without a GPU, `splitkv bench` says so and runs the CPU backend on a small problem.\n");
}

bool parse_args(int argc, char** argv, CliOptions* o, std::string* error) {
  if (argc < 2) {
    o->command = "help";
    return true;
  }
  o->command = argv[1];
  if (o->command == "-h" || o->command == "--help") o->command = "help";
  const std::map<std::string, int*> ints = {
      {"-b", &o->batch},          {"--batch", &o->batch},         {"--hq", &o->num_q_heads},
      {"--hkv", &o->num_kv_heads}, {"-d", &o->head_dim},           {"--head-dim", &o->head_dim},
      {"--lq", &o->q_len},        {"--lk", &o->kv_len},           {"--page-size", &o->page_size},
      {"--max-splits", &o->max_splits}, {"--split-tokens", &o->split_tokens}, {"--iters", &o->iters},
      {"--sms", &o->sm_count}, {plan::kL2PrefetchKeysFlag, &o->tuning.l2_prefetch_keys}};
  const std::map<std::string, float*> floats = {{"--softcap", &o->softcap},
                                                 {"--atomic-reference-lse", &o->atomic_reference_lse}};
  const std::map<std::string, std::string*> strings = {
      {"--mode", &o->mode},       {"--dtype", &o->dtype},   {"--kv-format", &o->kv_format},
      {"--strategy", &o->strategy}, {"--family", &o->family}, {"--json", &o->json_path},
      {"--suite", &o->suite},     {"--backend", &o->backend}};
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const plan::TuningSwitch* flipped = nullptr;
    for (const plan::TuningSwitch& t : plan::kTuningSwitches) {
      if (arg == t.flag) flipped = &t;
    }
    if (flipped != nullptr) {
      o->tuning.*(flipped->field) = !flipped->default_on;
    } else if (arg == "--sinks") {
      o->sinks = true;
    } else if (arg == "--tree") {
      o->tree_mask = true;
    } else if (arg == "--causal") {
      o->causal = true;
    } else if (arg == "--varlen") {
      o->varlen = true;
    } else if (arg == "--kv-cache") {
      o->kv_cache = true;
    } else if (arg == "--kv-head-major") {
      o->kv_head_major = true;
    } else if (arg == "-h" || arg == "--help") {
      o->command = "help";
    } else if (i + 1 >= argc) {
      *error = "missing value after " + arg;
      return false;
    } else if (arg == "--splits") {
      const std::string v = argv[++i];
      if (v != "auto" && !parse_int(v, &o->num_splits)) {
        *error = "--splits expects auto or an integer, got " + v;
        return false;
      }
    } else if (arg == "--merge") {
      const std::string v = argv[++i];
      if (!plan::merge_of(v, &o->merge)) {
        *error = "--merge expects one of " + plan::merge_names() + ", got " + v;
        return false;
      }
    } else if (arg == "--window") {
      const std::string v = argv[++i];
      const size_t comma = v.find(',');
      if (!parse_int(v.substr(0, comma), &o->window_left) ||
          (comma != std::string::npos && !parse_int(v.substr(comma + 1), &o->window_right))) {
        *error = "--window expects LEFT or LEFT,RIGHT (keys; -1: unbounded), got " + v;
        return false;
      }
    } else if (arg == "--seed") {
      o->seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (auto f = floats.find(arg); f != floats.end()) {
      const std::string v = argv[++i];
      if (!parse_float(v, f->second)) {
        *error = arg + " expects a number, got " + v;
        return false;
      }
    } else if (auto it = ints.find(arg); it != ints.end()) {
      const std::string v = argv[++i];
      if (!parse_int(v, it->second)) {
        *error = arg + " expects an integer, got " + v;
        return false;
      }
      if (arg != "--iters" && arg != "--sms" && arg != "--max-splits" && arg != "--split-tokens") {
        o->shape_given = true;
      }
    } else if (auto it2 = strings.find(arg); it2 != strings.end()) {
      *it2->second = argv[++i];
    } else {
      *error = "unknown option " + arg;
      return false;
    }
  }
  if (o->iters < 1) {
    *error = "--iters expects at least 1 timed iteration, got " + std::to_string(o->iters);
    return false;
  }
  // Decode always reads a KV cache; the flag chooses where prefill's K/V come from.
  if (o->kv_cache && o->mode != "prefill") {
    *error = "--kv-cache needs --mode prefill (decode always reads a KV cache), got --mode " + o->mode;
    return false;
  }
  if (o->kv_head_major && o->mode != "decode") {
    *error = "--kv-head-major lays out a decode cache (--mode decode), got --mode " + o->mode;
    return false;
  }
  return true;
}

}  // namespace splitkv::cli
