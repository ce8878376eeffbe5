#include <cstdio>

#include "commands.hpp"
#include "problem_builder.hpp"
#include "testing/device_buffer.hpp"

namespace splitkv::cli {

int cmd_plan(const CliOptions& o) {
  Formats formats;
  PlanOptions options;
  if (!parse_formats_and_options(o, &formats, &options)) return 1;
  DeviceInfo device = DeviceInfo::h200();
  const char* source = "no GPU: planning for an H200";
  if (testing::gpu_available() && query_device(0, &device).ok()) source = "device 0";
  if (o.sm_count > 0) {
    device.sm_count = o.sm_count;
    source = "--sms override";
  }
  Plan plan;
  const Status status = o.mode == "prefill" ? plan_prefill(to_prefill_problem(o, formats), device, options, &plan)
                                            : plan_decode(to_decode_problem(o, formats), device, options, &plan);
  if (!status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  std::printf("(%s)\n%s", source, describe(plan).c_str());
  return 0;
}

}  // namespace splitkv::cli
