// Status returned by every entry point; Error is the same information as an exception.
#pragma once

#include <stdexcept>
#include <string>

namespace splitkv {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a value the API can never accept (shape mismatch, null pointer, ...)
  kUnsupported,        // valid in principle, not in this build (head dim, dtype, architecture)
  kWorkspaceTooSmall,  // the caller's workspace is smaller than plan.workspace_bytes
  kCudaError,          // the CUDA runtime reported an error
  kNoDevice,           // no usable GPU
};

const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string argument, std::string message);

  static Status success() { return Status(); }
  // "argument: expected <expected>, got <got>" -- every validation error names the argument.
  static Status invalid(const std::string& argument, const std::string& expected,
                        const std::string& got);
  static Status unsupported(const std::string& argument, const std::string& what);

  bool ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  // The offending argument, e.g. "k.shape[2]" or "block_table"; empty when not about one.
  const std::string& argument() const { return argument_; }
  // Human-readable, complete: "splitkv: invalid argument 'q.stride[3]': expected 1 ..., got 2".
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string argument_;
  std::string message_;
};

class Error : public std::runtime_error {
 public:
  explicit Error(const Status& status)
      : std::runtime_error(status.message()), status_(status) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// For callers who prefer exceptions: throws Error when !status.ok().
void throw_if_error(const Status& status);

}  // namespace splitkv
