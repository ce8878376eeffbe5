// Command-line parsing of the `splitkv` tool.
#include <gtest/gtest.h>

#include "cli_args.hpp"
#include "plan/plan_options_table.hpp"
#include "problem_builder.hpp"

namespace splitkv::cli {
namespace {

bool parse(std::vector<std::string> args, CliOptions* o, std::string* error) {
  std::vector<char*> argv;
  static std::string name = "splitkv";
  argv.push_back(name.data());
  for (std::string& a : args) argv.push_back(a.data());
  return parse_args(static_cast<int>(argv.size()), argv.data(), o, error);
}

TEST(Cli, ParsesShapeAndSplits) {
  CliOptions o;
  std::string error;
  ASSERT_TRUE(parse({"bench", "-b", "4", "--hq", "64", "--hkv", "8", "--lk", "32768", "--splits", "12",
                     "--page-size", "64", "--causal", "--json", "x.json"},
                    &o, &error))
      << error;
  EXPECT_EQ(o.command, "bench");
  EXPECT_EQ(o.batch, 4);
  EXPECT_EQ(o.num_q_heads, 64);
  EXPECT_EQ(o.kv_len, 32768);
  EXPECT_EQ(o.num_splits, 12);
  EXPECT_EQ(o.page_size, 64);
  EXPECT_TRUE(o.causal);
  EXPECT_TRUE(o.shape_given);
  EXPECT_EQ(o.json_path, "x.json");
  const DecodeProblem p = to_decode_problem(o, Formats{});
  EXPECT_EQ(p.max_kv_len, 32768);
}

TEST(Cli, RejectsBadValues) {
  CliOptions o;
  std::string error;
  EXPECT_FALSE(parse({"bench", "--splits", "many"}, &o, &error));
  EXPECT_NE(error.find("--splits"), std::string::npos);
  EXPECT_FALSE(parse({"bench", "--batch"}, &o, &error));
  EXPECT_FALSE(parse({"bench", "--bogus", "1"}, &o, &error));
  EXPECT_FALSE(parse({"bench", "--iters", "0"}, &o, &error));  // a median of no replays
  EXPECT_NE(error.find("--iters"), std::string::npos);
  o = CliOptions{};
  DType dtype;
  EXPECT_EQ(to_dtype("fp32", &dtype).argument(), "--dtype");
  KvFormat format;
  EXPECT_EQ(to_kv_format("int3", &format).argument(), "--kv-format");
  PlanOptions po;
  o.strategy = "magic";
  EXPECT_EQ(to_plan_options(o, &po).argument(), "--strategy");
}

TEST(Cli, HelpFamilyAndKvFormat) {
  for (const char* help : {"--help", "-h", "help"}) {
    CliOptions o;
    std::string error;
    ASSERT_TRUE(parse({help}, &o, &error)) << error;
    EXPECT_EQ(o.command, "help") << help;
  }
  CliOptions o;
  std::string error;
  ASSERT_TRUE(parse({"plan", "--mode", "prefill", "--family", "prefill_mma_k16v64", "--kv-format", "bf16"}, &o, &error))
      << error;
  Formats formats;
  PlanOptions options;
  ASSERT_TRUE(parse_formats_and_options(o, &formats, &options));
  EXPECT_EQ(options.family, "prefill_mma_k16v64");
  EXPECT_EQ(formats.kv_format, KvFormat::kBF16);
  EXPECT_EQ(to_prefill_problem(o, formats).kv_format, KvFormat::kBF16);
}

TEST(Cli, PrefillOverAKvCache) {
  CliOptions o;
  std::string error;
  ASSERT_TRUE(parse({"plan", "--mode", "prefill", "--lq", "256", "--lk", "8448", "--causal"}, &o, &error)) << error;
  PrefillProblem p = to_prefill_problem(o, Formats{});
  EXPECT_FALSE(p.kv_cache);  // K/V token tensors unless asked
  EXPECT_EQ(p.page_size, 0);

  CliOptions cached;  // the flag before --mode: checked once all flags are read
  ASSERT_TRUE(parse({"plan", "--kv-cache", "--mode", "prefill", "--lq", "256", "--lk", "8448"}, &cached, &error))
      << error;
  EXPECT_TRUE(cached.kv_cache);
  p = to_prefill_problem(cached, Formats{});
  EXPECT_TRUE(p.kv_cache);
  EXPECT_EQ(p.page_size, 0);  // contiguous
  EXPECT_EQ(p.max_kv_len, 8448);

  for (const bool flag : {true, false}) {  // a page size implies the cache
    CliOptions paged;
    std::vector<std::string> args = {"plan", "--mode", "prefill", "--lq", "256", "--lk", "8448", "-b", "2",
                                     "--causal", "--page-size", "16"};
    if (flag) args.push_back("--kv-cache");
    ASSERT_TRUE(parse(args, &paged, &error)) << error;
    p = to_prefill_problem(paged, Formats{});
    EXPECT_TRUE(p.kv_cache) << flag;
    EXPECT_EQ(p.page_size, 16) << flag;
    Plan plan;
    const Status planned = plan_prefill(p, DeviceInfo::h200(), {}, &plan);
    ASSERT_TRUE(planned.ok()) << planned.message();
    EXPECT_NE(describe(plan).find("kv_cache=1 page_size=16"), std::string::npos) << describe(plan);
  }
}

TEST(Cli, KvCacheErrorsNameTheFlag) {
  const std::vector<std::vector<std::string>> decode = {
      {"plan", "--kv-cache"}, {"verify", "--kv-cache", "--mode", "decode", "--page-size", "16"}};
  for (const std::vector<std::string>& args : decode) {
    CliOptions o;
    std::string error;
    EXPECT_FALSE(parse(args, &o, &error));
    EXPECT_NE(error.find("--kv-cache"), std::string::npos) << error;
    EXPECT_NE(error.find("--mode prefill"), std::string::npos) << error;
  }
  // The page size is the library's to check; its message names the field.
  CliOptions o;
  std::string error;
  ASSERT_TRUE(parse({"plan", "--mode", "prefill", "--lq", "64", "--lk", "1000", "--page-size", "24"}, &o, &error))
      << error;
  Plan plan;
  const Status s = plan_prefill(to_prefill_problem(o, Formats{}), DeviceInfo::h200(), {}, &plan);
  EXPECT_EQ(s.argument(), "page_size");
  EXPECT_NE(s.message().find("multiple of 16"), std::string::npos) << s.message();
}

TEST(Cli, HeadMajorCacheIsADecodeLayout) {
  CliOptions o;
  std::string error;
  ASSERT_TRUE(parse({"bench", "--kv-head-major", "--kv-format", "int4", "--page-size", "16"}, &o, &error)) << error;
  EXPECT_TRUE(o.kv_head_major);
  CliOptions prefill;
  EXPECT_FALSE(parse({"bench", "--mode", "prefill", "--kv-head-major"}, &prefill, &error));
  EXPECT_NE(error.find("--kv-head-major"), std::string::npos) << error;
  EXPECT_NE(error.find("--mode decode"), std::string::npos) << error;
}

// --no-prefill-route reaches PlanTuning: the speculative shape the planner serves by chunked
// prefill then plans on the decode kernels.
TEST(Cli, NoPrefillRouteKeepsTheDecodeKernels) {
  bool compiled = false;  // the route takes families this build compiled
  for (const KernelFamilyInfo& f : kernel_families()) {
    for (const KernelFamilyInfo::Compiled& c : f.compiled) {
      compiled |= f.name == "prefill_sm90_gqa64" && c.dtype == DType::kBF16 && c.head_dim == 128;
    }
  }
  if (!compiled) GTEST_SKIP() << "this build lacks prefill_sm90_gqa64 for bf16 at D=128";
  for (bool route : {true, false}) {
    CliOptions o;
    std::string error;
    std::vector<std::string> args = {"plan", "-b", "8", "--hq", "28", "--hkv", "4", "--lk", "8192", "--lq", "8",
                                     "--causal"};
    if (!route) args.push_back("--no-prefill-route");
    ASSERT_TRUE(parse(args, &o, &error)) << error;
    EXPECT_EQ(o.tuning.prefill_route, route);
    PlanOptions po;
    ASSERT_TRUE(to_plan_options(o, &po).ok());
    EXPECT_EQ(po.tuning.prefill_route, route);
    Plan plan;
    ASSERT_TRUE(plan_decode(to_decode_problem(o, Formats{}), DeviceInfo::h200(), po, &plan).ok());
    EXPECT_EQ(plan.decode_via_prefill(), route) << plan.note();
  }
}

}  // namespace
}  // namespace splitkv::cli

namespace splitkv::cli {
namespace {

// Every merge name and every tuning switch of the one options table reaches PlanOptions.
TEST(Cli, MergeNamesAndTuningSwitchesComeFromTheOptionsTable) {
  for (const plan::MergeName& m : plan::kMergeNames) {
    CliOptions o;
    std::string error;
    ASSERT_TRUE(parse({"plan", "--merge", m.name}, &o, &error)) << error;
    PlanOptions po;
    ASSERT_TRUE(to_plan_options(o, &po).ok());
    EXPECT_EQ(po.merge, m.merge) << m.name;
    EXPECT_STREQ(to_string(m.merge), m.name);
  }
  CliOptions bad;
  std::string error;
  EXPECT_FALSE(parse({"plan", "--merge", "both"}, &bad, &error));
  EXPECT_NE(error.find("combine-kernel"), std::string::npos) << error;
  for (const plan::TuningSwitch& t : plan::kTuningSwitches) {
    CliOptions o;
    ASSERT_TRUE(parse({"plan", t.flag}, &o, &error)) << error;
    PlanOptions po;
    ASSERT_TRUE(to_plan_options(o, &po).ok());
    EXPECT_EQ(po.tuning.*(t.field), !t.default_on) << t.flag;
    EXPECT_EQ(PlanTuning{}.*(t.field), t.default_on) << t.flag << ": the table's default is not PlanTuning's";
    int flipped = 0;
    for (const plan::TuningSwitch& u : plan::kTuningSwitches) flipped += po.tuning.*(u.field) != u.default_on;
    EXPECT_EQ(flipped, 1) << t.flag << " flipped another switch too";
  }
  CliOptions keys;
  ASSERT_TRUE(parse({"plan", plan::kL2PrefetchKeysFlag, "48"}, &keys, &error)) << error;
  PlanOptions po;
  ASSERT_TRUE(to_plan_options(keys, &po).ok());
  EXPECT_EQ(po.tuning.l2_prefetch_keys, 48);
}

}  // namespace
}  // namespace splitkv::cli

namespace splitkv::cli {
namespace {

// The variant flags reach the problem, and describe() lists what the plan was asked for.
TEST(Cli, VariantFlagsReachTheProblem) {
  CliOptions o;
  std::string error;
  ASSERT_TRUE(parse({"plan", "--lq", "4", "--causal", "--window", "256,0", "--softcap", "30", "--sinks", "--tree"}, &o,
                    &error))
      << error;
  const DecodeProblem p = to_decode_problem(o, Formats{});
  EXPECT_EQ(p.window_left, 256);
  EXPECT_EQ(p.window_right, 0);
  EXPECT_EQ(p.softcap, 30.f);
  EXPECT_TRUE(p.sinks);
  EXPECT_TRUE(p.tree_mask);
  Plan plan;
  ASSERT_TRUE(plan_decode(p, DeviceInfo::h200(), {}, &plan).ok());
  EXPECT_NE(describe(plan).find("variants: window 256,0 softcap 30"), std::string::npos) << describe(plan);
  CliOptions left_only;
  ASSERT_TRUE(parse({"plan", "--window", "128"}, &left_only, &error)) << error;
  EXPECT_EQ(left_only.window_left, 128);
  EXPECT_EQ(left_only.window_right, -1);
  CliOptions bad;
  EXPECT_FALSE(parse({"plan", "--window", "12,x"}, &bad, &error));
  EXPECT_NE(error.find("--window"), std::string::npos) << error;
  EXPECT_FALSE(parse({"plan", "--softcap", "big"}, &bad, &error));
  EXPECT_NE(error.find("--softcap"), std::string::npos) << error;
}

}  // namespace
}  // namespace splitkv::cli
