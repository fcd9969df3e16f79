// One unary gRPC call over an established HTTP/2 byte stream, on libnghttp2: gRPC's HTTP/2
// mapping (PROTOCOL-HTTP2.md) for the request, the response message and its status.
//
// Why not libgrpc++: it cannot offer a custom ALPN list, nor send an SNI different from the
// name it verifies (docs/TRANSPORT.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "wire/byte_stream.h"
#include "wire/grpc_status.h"

namespace hotfix::wire {

struct Metadata {
  std::string key;  // lower case
  std::string value;
  // Sent with HPACK "never indexed" and never logged: credentials.
  bool sensitive = false;
};

struct UnaryRequest {
  std::string authority;  // ":authority", e.g. "myapi.example.com" or "host:6443"
  std::string path;       // "/package.Service/Method"
  std::string user_agent;
  std::vector<Metadata> metadata;
  std::string message;  // the serialized request
  // Responses larger than this fail locally with ResourceExhausted, as grpc-go's default.
  size_t max_response_bytes = 4 * 1024 * 1024;
};

struct UnaryResponse {
  GrpcStatus status;
  std::string message;  // the serialized response; empty unless status is OK
  // True when the status came from the server's headers; false when this client made it up
  // (transport failure, deadline, oversize response).
  bool from_server = false;
};

// Sends the connection preface, SETTINGS (push disabled), the request with "grpc-timeout" = the
// deadline's remaining time, and waits for the response. Never throws; every failure is a status:
//  - grpc-status from trailers or a trailers-only response, grpc-message percent-decoded;
//  - a non-200 :status without grpc-status maps by GrpcCodeFromHttpStatus;
//  - deadline -> DeadlineExceeded; stream/connection errors, GOAWAY, RST_STREAM ->
//    Unavailable or the code the RST implies; missing status -> Internal;
//  - compressed message, several messages, a length prefix that lies -> Internal;
//  - a message over max_response_bytes -> ResourceExhausted.
UnaryResponse CallUnary(ByteStream& stream, const UnaryRequest& request, Deadline deadline);

}  // namespace hotfix::wire
