// One HTTP/2 server connection speaking unary gRPC, as bytes in and bytes out: nghttp2's
// server session, gRPC's HTTP/2 mapping for unary calls (wire/grpc_framing.h), and every
// per-connection limit a peer runs into before any identity check. No socket and no TLS here:
// the event loop (grpc_server.cc) moves the bytes, and the fuzzer (tests/fuzz) feeds them.
//
//   H2Session session(limits, &handler, "ipv4:10.0.0.1:5000", Clock::now(), &events);
//   if (!session.Receive(bytes, now)) close();     // protocol error or a limit: GOAWAY queued
//   session.TakeOutput(&out, max);  write(out);     // SETTINGS, responses, GOAWAY
//   session.OnTimer(now) at session.NextDeadline(); close when session.Finished()
//
// A call is handled inline, on the thread that fed the bytes which completed it: the
// handler sees the whole request (headers and the one message) and fills in the reply.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/token_bucket.h"
#include "service/transport/transport_events.h"
#include "wire/grpc_status.h"

struct nghttp2_session;

namespace hotfix::service {

using SteadyClock = std::chrono::steady_clock;

// Everything a peer can make one connection hold or do, set deliberately (docs/SERVICE.md,
// "Limits"). A node makes one unary call per connection.
struct H2Limits {
  // SETTINGS_MAX_CONCURRENT_STREAMS. nghttp2 refuses streams beyond it (REFUSED_STREAM).
  uint32_t max_concurrent_streams = 4;
  // SETTINGS_MAX_HEADER_LIST_SIZE, counted as RFC 9113 does (name + value + 32 per field),
  // over pseudo-headers and metadata alike. The attested document is up to 64 KiB of base64.
  uint32_t max_header_list_bytes = 80 * 1024;
  // The one request message, prefix excluded. GetComponentConfigRequest is a short name.
  uint32_t max_request_bytes = 16 * 1024;
  // CONTINUATION frames after one HEADERS (nghttp2_option_set_max_continuations).
  uint32_t max_continuations = 8;
  // Streams the peer may reset: a burst, then a rate (nghttp2's reset rate limit, the
  // CVE-2023-44487 fix); past it, GOAWAY ENHANCE_YOUR_CALM.
  uint32_t reset_burst = 100;
  uint32_t resets_per_second = 10;
  // SETTINGS, PING, PRIORITY, WINDOW_UPDATE and empty DATA frames: a burst, then a rate,
  // plus a few for every request the peer makes (clients send WINDOW_UPDATEs and BDP PINGs
  // as calls complete); past it, GOAWAY ENHANCE_YOUR_CALM. Frames that do work pay for the
  // frames that do not, so only a peer that mostly sends the latter runs out.
  uint32_t control_frame_burst = 200;
  uint32_t control_frames_per_second = 50;
  uint32_t control_frames_per_request = 4;
  // Queued SETTINGS and PING ACKs that the peer does not read (nghttp2's max_outbound_ack).
  uint32_t max_outbound_acks = 100;
  // From the connection's start to its first answer: a connection that has not had a call
  // answered by then (none sent, or none finished) is ended at once, whatever it holds open.
  std::chrono::milliseconds first_request_timeout{10000};
  // From a request's HEADERS to its end (END_STREAM); shortened by a smaller grpc-timeout.
  // A request that runs out is reset and its connection gets GOAWAY: a peer that holds
  // streams without finishing them keeps the connection no longer than its open streams' own
  // timeouts, however often it opens new ones.
  std::chrono::milliseconds request_timeout{10000};
  // Answers one connection gets; the last one is followed by GOAWAY (a client opens a new
  // connection for more). A node makes one call per connection.
  uint32_t max_calls_per_connection = 64;
  // With no stream open: then GOAWAY and close.
  std::chrono::milliseconds idle_timeout{30000};
};

// One unary call as the handler sees it. The views live until Handle returns.
struct GrpcCall {
  std::string_view path;       // ":path", "/package.Service/Method"
  std::string_view authority;  // ":authority"
  std::string_view peer;       // "ipv4:10.0.0.1:5000"
  // The values of the metadata keys the session was told to keep (H2SessionOptions), in
  // arrival order; at most 4 per key.
  std::vector<std::pair<std::string_view, std::string_view>> metadata;
  std::string_view message;  // the request message, unframed
};

struct GrpcReply {
  wire::GrpcCode code = wire::GrpcCode::kOk;
  std::string error_message;  // grpc-message when code is not OK
  std::string message;        // the response message when code is OK
  // A test hook: the reply leaves this much later (the session's timer), so a test can
  // have a call in flight. Zero in production.
  std::chrono::milliseconds delay{0};
  // After this answer the connection is done: GOAWAY, no later stream of it reaches the
  // handler (REFUSED_STREAM, which a client retries elsewhere), and it closes once the answer
  // is out. For refusals of the caller's identity: a node makes one call per connection, so a
  // peer that is refused gets one answer per connection it pays a handshake for; the server
  // counts the connection against its peer's address (refused_peers.h).
  bool close_connection = false;
  // With close_connection: the refusal is the caller's own doing (a missing, malformed or
  // forged document), so it counts against the caller's address (refused_peers.h). Not for
  // what a real node can be refused for through no act of the peer it shares an address with
  // (an expired document, a subscription off the allow-list).
  bool caller_at_fault = false;
};

class GrpcHandler {
 public:
  virtual ~GrpcHandler() = default;
  // Answers every path, UNIMPLEMENTED for those it does not serve. Called on the loop
  // thread; thread-safe when the server runs more than one loop.
  virtual void Handle(const GrpcCall& call, GrpcReply* reply) = 0;
};

class ConnectionMemory;

struct H2SessionOptions {
  H2Limits limits;
  // The connection's memory account (connection_memory.h): nghttp2's allocations and the
  // request bytes streams keep charge it. Borrowed, may be null (nothing is then counted).
  ConnectionMemory* memory = nullptr;
  GrpcHandler* handler = nullptr;        // borrowed
  TransportEventSink* events = nullptr;  // borrowed; may be null
  // Metadata keys (lower case) whose values reach GrpcCall::metadata; others are counted
  // against the header list limit and dropped.
  std::vector<std::string> kept_metadata;
};

class H2Session {
 public:
  H2Session(const H2SessionOptions& options, std::string peer, SteadyClock::time_point now);
  ~H2Session();
  H2Session(const H2Session&) = delete;
  H2Session& operator=(const H2Session&) = delete;

  // Feeds bytes from the peer, answering every call they complete. False once the
  // connection must end (a protocol error or a connection-level limit): a GOAWAY is queued,
  // send TakeOutput() and close. Bytes after that are ignored.
  bool Receive(std::string_view bytes, SteadyClock::time_point now);

  // Appends up to max_bytes of pending output to out.
  void TakeOutput(std::string* out, size_t max_bytes);
  // Frames nghttp2 holds for TakeOutput (nghttp2_session_get_outbound_queue_size).
  size_t queued_output_frames() const;

  // Runs what is due at now: delayed replies, request and idle timeouts.
  void OnTimer(SteadyClock::time_point now);
  // When OnTimer next has something to do; time_point::max() if nothing.
  SteadyClock::time_point NextDeadline() const;

  // Graceful drain: GOAWAY with the last stream seen; open streams may finish.
  void Shutdown();
  // True when the session has nothing more to read or write: close the connection.
  bool Finished() const;
  // Streams opened and not yet closed.
  size_t open_streams() const { return streams_open_; }
  // A reply asked for the connection's end (GrpcReply::close_connection): its caller was refused.
  bool closed_by_reply() const { return closed_by_reply_; }
  // Evidence against the peer's address (refused_peers.h): a refusal that was the caller's
  // own doing (GrpcReply::caller_at_fault), or a connection that had nothing answered by the
  // first-request timeout.
  bool peer_at_fault() const { return peer_at_fault_; }

 private:
  // GOAWAY with this last stream: later ones are refused (REFUSED_STREAM), earlier ones finish.
  // With after_stream, the frame itself waits until that stream's answer has gone out whole
  // (SendPendingGoaway): a client that reads a GOAWAY first may drop what follows it.
  void ShutdownAfter(int32_t last_stream_id, int32_t after_stream = 0);
  void SendPendingGoaway();
  struct Stream;
  friend struct H2Callbacks;

  void Fail(TransportEvent event, uint32_t error_code, std::string_view detail = {});
  // The connection's memory account, for request bytes `stream` keeps (false: no room,
  // nothing charged).
  bool Charge(Stream* stream, size_t n);
  void Uncharge(Stream* stream);
  void Report(TransportEvent event, std::string_view detail = {});
  void Dispatch(Stream* stream);
  void Respond(Stream* stream, GrpcReply reply);
  void RespondHttp(Stream* stream, const char* http_status);
  void EndUnfinishedRequest(Stream* stream);
  Stream* Find(int32_t stream_id) const;

  H2SessionOptions options_;
  std::string peer_;
  nghttp2_session* session_ = nullptr;
  bool failed_ = false;
  SteadyClock::time_point now_;
  SteadyClock::time_point started_;
  SteadyClock::time_point idle_since_;
  uint64_t streams_started_ = 0;
  uint32_t answered_ = 0;  // streams answered (Respond, RespondHttp)
  uint32_t streams_open_ = 0;
  bool goaway_sent_ = false;
  bool closed_by_reply_ = false;
  bool peer_at_fault_ = false;
  bool peer_goaway_ = false;  // the peer is leaving: the end of the session is not an error
  int32_t goaway_last_stream_id_ = 0;  // the last stream our GOAWAY lets finish
  int32_t goaway_after_stream_ = 0;    // the GOAWAY is decided, and sent once this one is out
  TokenBucket control_;
  TokenBucket resets_;
  std::vector<std::unique_ptr<Stream>> streams_;  // open streams; few (max_concurrent_streams)
};

}  // namespace hotfix::service
