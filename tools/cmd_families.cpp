#include <cstdio>
#include <string>

#include "commands.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv::cli {

int cmd_families(const CliOptions&) {
  std::printf("%-22s %-9s %-6s %-29s %-12s %s\n", "family", "kind", "arch", "strategies", "head dims", "compiled here");
  for (const KernelFamilyInfo& f : kernel_families()) {
    std::string strategies, dims, compiled;
    for (Strategy s : f.strategies) strategies += (strategies.empty() ? "" : ",") + std::string(to_string(s));
    for (int d : f.head_dims) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    for (const KernelFamilyInfo::Compiled& c : f.compiled) {
      compiled += (compiled.empty() ? "" : " ") + std::string(to_string(c.dtype)) + "/" + std::to_string(c.head_dim);
    }
    if (f.priority < 0) strategies += " (by name)";
    std::printf("%-22s %-9s %-6s %-29s %-12s %s\n", f.name.c_str(), f.kind.c_str(), f.arch.c_str(),
                strategies.empty() ? "-" : strategies.c_str(), dims.c_str(), compiled.empty() ? "-" : compiled.c_str());
  }
  return 0;
}

}  // namespace splitkv::cli
