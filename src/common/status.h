// Status: the result of every fallible call. A message says what went wrong in the words an
// operator reads in the log; callers add context with Annotate() ("reading node config X: ...").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace hotfix {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,          // a file or key that is not there (ENOENT and friends)
    kInvalidArgument,   // input that does not parse or fails validation
    kIoError,           // a system call failed
    kDeadlineExceeded,  // the time budget ran out
    kUnavailable,       // a peer could not be reached or broke the protocol
    kPermissionDenied,  // TLS verification or access failure
    kInternal,          // a bug: should not happen
    // Bytes that should have been authenticated were not: a signature, size or digest check
    // failed, or verified data is malformed (download-hotfix's repository fast path: terminal).
    kDataLoss,
    kFailedPrecondition,  // a platform or configuration this path does not support
    kCancelled,           // stopped because its result was no longer wanted
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status InvalidArgument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  static Status IoError(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  // "<what>: <strerror(err)>"
  static Status FromErrno(std::string_view what, int err);
  static Status DeadlineExceeded(std::string msg) {
    return Status(Code::kDeadlineExceeded, std::move(msg));
  }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status PermissionDenied(std::string msg) {
    return Status(Code::kPermissionDenied, std::move(msg));
  }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status DataLoss(std::string msg) { return Status(Code::kDataLoss, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) {
    return Status(Code::kFailedPrecondition, std::move(msg));
  }
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  const std::string& message() const { return message_; }
  // Same code, message "<prefix>: <message>".
  Status Annotate(std::string_view prefix) const;
  std::string ToString() const { return ok() ? "OK" : message_; }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains its absence.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("StatusOr built from an OK status");
  }
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace hotfix
