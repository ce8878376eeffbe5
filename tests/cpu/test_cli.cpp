// Command-line parsing of the `splitkv` tool.
#include <gtest/gtest.h>

#include "cli_args.hpp"
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

}  // namespace
}  // namespace splitkv::cli
