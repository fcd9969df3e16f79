// gRPC status codes and the parts of gRPC's HTTP/2 mapping that turn headers into them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hotfix::wire {

enum class GrpcCode {
  kOk = 0,
  kCanceled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// grpc-go's CamelCase names ("NotFound", "DeadlineExceeded", "Canceled"), which the
// reference's log lines and event messages carry.
std::string_view GrpcCodeName(GrpcCode code);

// The upper-case spelling of gRPC's status code names ("OK", "NOT_FOUND", "DEADLINE_EXCEEDED";
// "CANCELLED" as grpc's status.proto spells it): metric labels and the service's access log.
std::string_view GrpcCodeUpperName(GrpcCode code);

// Parses a grpc-status header value: a decimal 0..16. Anything else is nullopt.
std::optional<GrpcCode> ParseGrpcStatus(std::string_view value);

// gRPC's HTTP-to-gRPC table for responses without grpc-status: 400 Internal, 401 Unauthenticated,
// 403 PermissionDenied, 404 Unimplemented, 429/502/503/504 Unavailable, anything else Unknown.
GrpcCode GrpcCodeFromHttpStatus(int http_status);

// Decodes grpc-message's percent-encoding. Malformed escapes are kept literally, as gRPC does.
std::string PercentDecode(std::string_view encoded);

// grpc-message's percent-encoding (PROTOCOL-HTTP2.md, "Responses"): printable ASCII except '%'
// as is, every other byte (UTF-8 included) as %XX.
std::string PercentEncode(std::string_view text);

struct GrpcStatus {
  GrpcCode code = GrpcCode::kOk;
  std::string message;

  bool ok() const { return code == GrpcCode::kOk; }
  // "code = NotFound desc = ..." like grpc-go's status error text.
  std::string ToString() const;
};

}  // namespace hotfix::wire
