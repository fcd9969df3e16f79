// The parts of gRPC's HTTP/2 mapping (PROTOCOL-HTTP2.md in grpc/grpc) that a client and a
// server both need: the 5-byte length-prefixed message, grpc-timeout's text, and which
// content-types are gRPC. The node's client (grpc_unary.cc) and the service's server
// (service/transport/grpc_server.cc) share them; nothing here knows either side.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hotfix::wire {

// Compressed-Flag (1 byte) + Message-Length (4 bytes, big-endian).
inline constexpr size_t kGrpcPrefixSize = 5;

// The message with its prefix, Compressed-Flag 0.
std::string FrameGrpcMessage(std::string_view message);

// One length-prefixed message read from a whole request body.
struct GrpcFrame {
  bool compressed = false;
  std::string_view message;
};
enum class FrameError {
  kTruncated,      // fewer bytes than the prefix declares, or no whole prefix
  kTrailingBytes,  // bytes after the first message: a second message, for a unary call
  kBadFlag,        // a Compressed-Flag other than 0 or 1
};
// The first message of body, which must be exactly one message; nullopt with *error set.
std::optional<GrpcFrame> ParseUnaryGrpcBody(std::string_view body, FrameError* error);
// The Message-Length a prefix declares (prefix holds at least kGrpcPrefixSize bytes).
uint32_t DeclaredGrpcLength(std::string_view prefix);

// "1000m", "30S", "2H": at most 8 digits and the largest unit that keeps the value exact or
// rounds it up.
std::string EncodeGrpcTimeout(std::chrono::milliseconds timeout);
// TimeoutValue (1-8 ASCII digits) + TimeoutUnit (H M S m u n); nullopt for anything else.
// Sub-millisecond values round up to 1 ms; values past ~292 years saturate.
std::optional<std::chrono::milliseconds> ParseGrpcTimeout(std::string_view text);

// grpc-go's grpcutil.ContentSubtype: case-sensitive "application/grpc" with an optional
// "+subtype" or ";params".
bool IsGrpcContentType(std::string_view type);

}  // namespace hotfix::wire
