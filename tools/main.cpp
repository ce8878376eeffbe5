// splitkv: plan, verify and benchmark split-KV attention.
#include <cstdio>
#include <string>

#include "cli_args.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace splitkv::cli;
  CliOptions options;
  std::string error;
  if (!parse_args(argc, argv, &options, &error)) {
    std::fprintf(stderr, "splitkv: %s\n\n", error.c_str());
    print_usage();
    return 2;
  }
  if (options.command == "plan") return cmd_plan(options);
  if (options.command == "verify") return cmd_verify(options);
  if (options.command == "bench") return cmd_bench(options);
  if (options.command == "families") return cmd_families(options);
  if (options.command == "help") {
    print_usage();
    return 0;
  }
  std::fprintf(stderr, "splitkv: unknown command '%s'\n\n", options.command.c_str());
  print_usage();
  return 2;
}
