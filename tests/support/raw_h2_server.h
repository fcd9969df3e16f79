// RawH2Server: a scriptable HTTP/2 server on nghttp2's server API behind OpenSSL TLS (ALPN
// "h2" selected when offered), for the faults a real gRPC server never commits: GOAWAY before
// answering, RST_STREAM, odd :status codes, missing trailers, compressed or doubled or lying
// length-prefixed messages, any grpc-status. One reply script applies to every request
// (SetReply() changes it for later connections; thread-safe).
//
//   RawH2ServerOptions options;
//   options.cert = IssueLocalServerCert(ca, {kApiserverFqdn});
//   options.reply.body = GrpcFrame(ComponentConfigResponse(R"({"hotfixes":{}})"));
//   options.reply.trailers = GrpcTrailers(0);
//   RawH2Server server(std::move(options));   // listening on 127.0.0.1:server.port()
//   ... server.requests().at(0).Header(":path") ...
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "h2_frames.h"
#include "recorder.h"
#include "test_certs.h"

namespace hotfix::testsupport {

namespace net {
class ConnectionServer;
}

using HeaderList = h2::HeaderFields;

// What the server does once a request is complete (its END_STREAM arrived).
enum class RawH2Action {
  // HEADERS (:status, content-type, `headers`), then `body` as DATA, then `trailers`.
  kRespond,
  // GOAWAY with last-stream-id 0 (`error_code`, `goaway_debug`): the request is refused
  // unanswered. The connection stays open until the client closes it.
  kGoaway,
  // RST_STREAM(`error_code`) on the request's stream; the connection stays open.
  kRstStream,
  // The TCP connection is reset (SO_LINGER 0, then close): the request was sent and read.
  kTcpResetAfterRequest,
  // The TCP connection is reset as soon as the first bytes (the ClientHello) arrive; no TLS.
  kTcpResetInHandshake,
};

struct RawH2Reply {
  RawH2Action action = RawH2Action::kRespond;
  int http_status = 200;
  // nullopt: no content-type header at all.
  std::optional<std::string> content_type = std::string("application/grpc");
  // Further response headers, e.g. grpc-status in a trailers-only response.
  HeaderList headers;
  // true: the response HEADERS carry END_STREAM (a trailers-only response); body and
  // trailers are not sent.
  bool headers_only = false;
  // The raw DATA payload; GrpcFrame() builds gRPC's length-prefixed messages.
  std::string body;
  // nullopt: the last DATA frame carries END_STREAM and no trailers follow.
  std::optional<HeaderList> trailers = HeaderList{{"grpc-status", "0"}};
  uint32_t error_code = 0;  // for kGoaway and kRstStream (an HTTP/2 error code)
  std::string goaway_debug;
};

struct RawH2Request {
  HeaderList headers;  // pseudo-headers included, in arrival order
  std::string body;    // the DATA payload (gRPC-framed request message)
  // First value of a header (names are lower-case in HTTP/2); "" if absent.
  std::string Header(std::string_view name) const;
};

struct RawH2ServerOptions {
  CertAndKey cert;  // required
  RawH2Reply reply;
  uint16_t port = 0;  // 0: any free port on 127.0.0.1
};

// Like every server here, sets SIGPIPE to SIG_IGN process-wide.
class RawH2Server {
 public:
  explicit RawH2Server(RawH2ServerOptions options);  // listening when this returns
  ~RawH2Server();                                    // closes every connection, joins every thread
  RawH2Server(const RawH2Server&) = delete;
  RawH2Server& operator=(const RawH2Server&) = delete;

  uint16_t port() const;
  void SetReply(RawH2Reply reply);
  // TCP connections accepted so far (counted before any TLS).
  size_t accepted_count() const;
  // Every complete request, recorded before the reply script runs.
  std::vector<RawH2Request> requests() const;
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout) const;

 private:
  class Connection;
  void HandleConnection(int fd);
  RawH2Reply reply() const;

  struct SslContext;
  std::unique_ptr<SslContext> ctx_;
  mutable std::mutex mu_;
  RawH2Reply reply_;  // guarded by mu_
  Recorder<RawH2Request> requests_;
  std::unique_ptr<net::ConnectionServer> server_;  // last: stopped before the rest goes
};

// gRPC's length-prefixed message: a flags byte (1 = compressed), a 4-byte big-endian length
// (`declared_length` when set, to make the prefix lie), then the message bytes.
std::string GrpcFrame(std::string_view message, uint8_t flags = 0,
                      std::optional<uint32_t> declared_length = std::nullopt);

// GetComponentConfigResponse{component_name, config} encoded by hand, so that `config` may
// hold bytes a protobuf library would refuse to serialise (invalid UTF-8).
std::string ComponentConfigResponse(std::string_view config,
                                    std::string_view component = "aksNodeController");

// {"grpc-status", code} and, when not empty, {"grpc-message", message} sent as is (the
// caller percent-encodes).
HeaderList GrpcTrailers(int code, std::string_view message = "");

}  // namespace hotfix::testsupport
