#include "splitkv/status.hpp"

namespace splitkv {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kWorkspaceTooSmall: return "workspace too small";
    case StatusCode::kCudaError: return "CUDA error";
    case StatusCode::kNoDevice: return "no device";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string argument, std::string message)
    : code_(code), argument_(std::move(argument)) {
  message_ = std::string("splitkv: ") + to_string(code);
  if (!argument_.empty()) message_ += " '" + argument_ + "'";
  message_ += ": " + message;
}

Status Status::invalid(const std::string& argument, const std::string& expected,
                       const std::string& got) {
  return Status(StatusCode::kInvalidArgument, argument, "expected " + expected + ", got " + got);
}

Status Status::unsupported(const std::string& argument, const std::string& what) {
  return Status(StatusCode::kUnsupported, argument, what);
}

void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

}  // namespace splitkv
