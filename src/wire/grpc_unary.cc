#include "wire/grpc_unary.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/text.h"
#include "wire/grpc_framing.h"

namespace hotfix::wire {
namespace {

// Stream and connection receive window: a response up to the default 4 MiB limit arrives
// without waiting for WINDOW_UPDATE round trips.
constexpr int32_t kReceiveWindow = 8 << 20;

// A status this client makes up, as opposed to one the server sent (UnaryCall::DecideFromServer).
GrpcStatus Local(GrpcCode code, std::string message) { return {code, std::move(message)}; }
GrpcStatus DeadlineStatus() {
  return Local(GrpcCode::kDeadlineExceeded, "context deadline exceeded");
}

// Server-supplied text is echoed into messages with at most this many bytes.
constexpr size_t kMaxEchoedBytes = 128;

std::string Printable(std::string_view s) { return EscapeForMessage(s, kMaxEchoedBytes); }

bool IsPrintable(std::string_view s, bool allow_space) {
  return std::all_of(s.begin(), s.end(), [allow_space](char c) {
    return (c > 0x20 && c < 0x7f) || (allow_space && c == ' ');
  });
}

// grpc-go's http2ErrConvTab, including its deadline special case for CANCEL.
GrpcCode CodeForHttp2Error(uint32_t error_code, Deadline deadline) {
  switch (error_code) {
    case NGHTTP2_REFUSED_STREAM:
      return GrpcCode::kUnavailable;
    case NGHTTP2_CANCEL:
      return deadline.expired() ? GrpcCode::kDeadlineExceeded : GrpcCode::kCanceled;
    case NGHTTP2_FLOW_CONTROL_ERROR:
    case NGHTTP2_ENHANCE_YOUR_CALM:
      return GrpcCode::kResourceExhausted;
    case NGHTTP2_INADEQUATE_SECURITY:
      return GrpcCode::kPermissionDenied;
    default:
      return error_code <= NGHTTP2_HTTP_1_1_REQUIRED ? GrpcCode::kInternal : GrpcCode::kUnknown;
  }
}

// Why a request cannot be sent, or nullopt. Like grpc-go, bad metadata is Internal.
std::optional<GrpcStatus> ValidateRequest(const UnaryRequest& request) {
  auto invalid = [](std::string why) {
    return Local(GrpcCode::kInternal, "invalid request: " + why);
  };
  if (request.path.empty() || request.path[0] != '/' || !IsPrintable(request.path, false)) {
    return invalid("path must start with '/' and be printable ASCII");
  }
  if (request.authority.empty() || !IsPrintable(request.authority, false)) {
    return invalid("authority must be non-empty printable ASCII");
  }
  if (!IsPrintable(request.user_agent, true)) return invalid("user agent is not printable ASCII");
  if (request.message.size() > UINT32_MAX) return invalid("message larger than 4 GiB");
  for (const Metadata& md : request.metadata) {
    bool key_ok = !md.key.empty() && std::all_of(md.key.begin(), md.key.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    });
    if (!key_ok) return invalid("metadata key \"" + Printable(md.key) + "\" is not [0-9a-z-_.]");
    for (std::string_view reserved : {"content-type", "te", "user-agent", "grpc-timeout",
                                      "grpc-encoding", "grpc-status", "grpc-message"}) {
      if (md.key == reserved) return invalid("metadata key \"" + md.key + "\" is reserved");
    }
    if (md.key.size() > 4 && md.key.ends_with("-bin")) {
      return invalid("binary metadata \"" + md.key + "\" is not supported");
    }
    // The value is not echoed: it may be a credential.
    if (!IsPrintable(md.value, true))
      return invalid("value of \"" + md.key + "\" is not printable");
  }
  return std::nullopt;
}

// Decodes gRPC's length-prefixed framing of a unary response: exactly one message, flag 0.
class MessageDecoder {
 public:
  explicit MessageDecoder(size_t max_bytes) : max_bytes_(max_bytes) {}

  // An error as soon as the body is known to be unacceptable.
  std::optional<GrpcStatus> Feed(std::string_view data) {
    while (!data.empty()) {
      if (!in_message_) {
        size_t take = std::min(kGrpcPrefixSize - prefix_.size(), data.size());
        prefix_.append(data.substr(0, take));
        data.remove_prefix(take);
        if (prefix_.size() < kGrpcPrefixSize) break;
        if (auto error = StartMessage()) return error;
        continue;
      }
      size_t take = std::min(declared_ - message_.size(), data.size());
      message_.append(data.substr(0, take));
      data.remove_prefix(take);
      if (message_.size() == declared_) EndMessage();
    }
    return std::nullopt;
  }

  // At the end of the stream.
  std::optional<GrpcStatus> Finish() const {
    if (in_message_) {
      return Local(GrpcCode::kInternal,
                   "server sent a truncated message: " + std::to_string(message_.size()) + " of " +
                       std::to_string(declared_) + " declared bytes");
    }
    if (!prefix_.empty() && complete_ == 0) {
      return Local(GrpcCode::kInternal, "server sent a truncated length prefix");
    }
    if (!prefix_.empty()) {
      return Local(GrpcCode::kInternal, "server sent " + std::to_string(prefix_.size()) +
                                            " stray bytes after the message");
    }
    if (complete_ == 0) {
      return Local(GrpcCode::kInternal,
                   "cardinality violation: received no response message from non-server-streaming "
                   "RPC");
    }
    return std::nullopt;
  }

  std::string TakeMessage() { return std::move(message_); }

 private:
  std::optional<GrpcStatus> StartMessage() {
    if (complete_ > 0) {
      return Local(GrpcCode::kInternal,
                   "cardinality violation: expected <EOF> for non server-streaming RPCs, but "
                   "received another message");
    }
    auto byte = [this](size_t i) { return static_cast<uint8_t>(prefix_[i]); };
    if (byte(0) == 1) return Local(GrpcCode::kInternal, "compressed response not supported");
    if (byte(0) != 0) {
      return Local(GrpcCode::kInternal,
                   "grpc: received unexpected payload format " + std::to_string(byte(0)));
    }
    declared_ = DeclaredGrpcLength(prefix_);
    if (declared_ > max_bytes_) {
      return Local(GrpcCode::kResourceExhausted, "grpc: received message larger than max (" +
                                                     std::to_string(declared_) + " vs. " +
                                                     std::to_string(max_bytes_) + ")");
    }
    message_.reserve(declared_);
    in_message_ = true;
    if (declared_ == 0) EndMessage();
    return std::nullopt;
  }

  void EndMessage() {
    in_message_ = false;
    prefix_.clear();
    ++complete_;
  }

  size_t max_bytes_;
  std::string prefix_;  // the current length prefix, possibly incomplete
  bool in_message_ = false;
  size_t declared_ = 0;
  std::string message_;
  int complete_ = 0;
};

// The headers of one HEADERS block that matter to gRPC.
struct HeaderBlock {
  int http_status = 0;
  std::optional<std::string> content_type;
  std::optional<std::string> grpc_status;
  std::string grpc_message;
};

// One call on one fresh HTTP/2 connection. nghttp2 callbacks record what the server sent;
// the first decisive event sets outcome_ and ends the call.
class UnaryCall {
 public:
  UnaryCall(ByteStream& stream, const UnaryRequest& request, Deadline deadline)
      : stream_(stream),
        request_(request),
        deadline_(deadline),
        decoder_(request.max_response_bytes) {}
  ~UnaryCall() { nghttp2_session_del(session_); }
  UnaryCall(const UnaryCall&) = delete;
  UnaryCall& operator=(const UnaryCall&) = delete;

  UnaryResponse Run() {
    if (auto invalid = ValidateRequest(request_)) return {*invalid, {}};
    if (deadline_.expired()) return {DeadlineStatus(), {}};
    if (auto failed = Start()) return {*failed, {}};
    Pump();
    UnaryResponse response;
    response.status = *outcome_;
    response.from_server = outcome_from_server_;
    if (response.status.ok()) response.message = decoder_.TakeMessage();
    return response;
  }

 private:
  std::optional<GrpcStatus> Start() {
    body_ = FrameGrpcMessage(request_.message);

    if (!CreateSession()) return Local(GrpcCode::kInternal, "creating the HTTP/2 session failed");
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                         {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kReceiveWindow}};
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2) != 0 ||
        nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kReceiveWindow) !=
            0) {
      return Local(GrpcCode::kInternal, "submitting HTTP/2 SETTINGS failed");
    }
    return SubmitRequest();
  }

  bool CreateSession() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
    nghttp2_session_callbacks_set_send_callback(callbacks, OnSend);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, OnBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrameRecv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnDataChunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnStreamClose);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, OnInvalidFrame);
    nghttp2_session_callbacks_set_error_callback2(callbacks, OnError);
    int rv = nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    return rv == 0;
  }

  std::optional<GrpcStatus> SubmitRequest() {
    std::string timeout;
    if (!deadline_.infinite()) timeout = EncodeGrpcTimeout(deadline_.remaining());
    std::vector<nghttp2_nv> headers;
    auto add = [&headers](std::string_view name, std::string_view value, uint8_t flags) {
      headers.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                         reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                         value.size(), flags});
    };
    add(":method", "POST", NGHTTP2_NV_FLAG_NONE);
    add(":scheme", "https", NGHTTP2_NV_FLAG_NONE);
    add(":path", request_.path, NGHTTP2_NV_FLAG_NONE);
    add(":authority", request_.authority, NGHTTP2_NV_FLAG_NONE);
    add("content-type", "application/grpc", NGHTTP2_NV_FLAG_NONE);
    add("te", "trailers", NGHTTP2_NV_FLAG_NONE);
    if (!timeout.empty()) add("grpc-timeout", timeout, NGHTTP2_NV_FLAG_NONE);
    if (!request_.user_agent.empty()) add("user-agent", request_.user_agent, NGHTTP2_NV_FLAG_NONE);
    for (const Metadata& md : request_.metadata) {
      add(md.key, md.value, md.sensitive ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE);
    }
    nghttp2_data_provider body;
    body.source.ptr = this;
    body.read_callback = ReadBody;
    // nghttp2 copies names and values here, so the locals above may go.
    stream_id_ =
        nghttp2_submit_request(session_, nullptr, headers.data(), headers.size(), &body, nullptr);
    if (stream_id_ < 0) {
      return Local(GrpcCode::kInternal,
                   std::string("submitting the request failed: ") + nghttp2_strerror(stream_id_));
    }
    return std::nullopt;
  }

  // Sends what nghttp2 has queued, then feeds it the server's bytes until the call is decided.
  void Pump() {
    char buf[16384];
    while (!outcome_) {
      if (deadline_.expired()) return Decide(DeadlineStatus());
      if (Status sent = Flush(); !sent.ok()) return Decide(TransportFailure(sent, "sending"));
      if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) {
        return Decide(
            Local(GrpcCode::kUnavailable,
                  "HTTP/2 session ended" + (last_error_.empty() ? "" : ": " + last_error_)));
      }
      auto n = stream_.ReadSome(buf, sizeof(buf), deadline_);
      if (!n.ok()) return Decide(TransportFailure(n.status(), "reading the response"));
      if (*n == 0) return Decide(Local(GrpcCode::kUnavailable, ClosedMessage()));
      ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<uint8_t*>(buf), *n);
      if (rv < 0) {
        return Decide(Local(GrpcCode::kUnavailable, std::string("HTTP/2 connection error: ") +
                                                        nghttp2_strerror(static_cast<int>(rv))));
      }
    }
  }

  // A failed write is not the end: the server may have answered and closed before reading our
  // SETTINGS ACK or WINDOW_UPDATE, and its answer is still waiting to be read. Later output is
  // dropped and the read side decides; only the deadline fails the call here.
  Status Flush() {
    int rv = nghttp2_session_send(session_);
    if (rv != 0) return Status::Internal(std::string("HTTP/2 send: ") + nghttp2_strerror(rv));
    if (out_.empty() || !write_error_.empty()) {
      out_.clear();
      return Status::Ok();
    }
    Status written = stream_.WriteAll(out_, deadline_);
    out_.clear();
    if (written.code() == Status::Code::kDeadlineExceeded) return written;
    if (!written.ok()) write_error_ = written.message();
    return Status::Ok();
  }

  GrpcStatus TransportFailure(const Status& status, std::string_view what) const {
    if (status.code() == Status::Code::kDeadlineExceeded || deadline_.expired()) {
      return DeadlineStatus();
    }
    return Local(GrpcCode::kUnavailable, std::string(what) + ": " + status.message());
  }

  std::string ClosedMessage() const {
    std::string message =
        goaway_ ? "connection closed by the server after GOAWAY, before the response completed"
                : "connection closed by the server before the response completed";
    if (!write_error_.empty()) message += " (sending failed: " + write_error_ + ")";
    return message;
  }

  // The first decision wins: later events (stream close after trailers, ...) are echoes.
  void Decide(GrpcStatus status) {
    if (!outcome_) outcome_ = std::move(status);
  }
  void DecideFromServer(GrpcCode code, std::string message) {
    if (outcome_) return;
    outcome_ = GrpcStatus{code, std::move(message)};
    outcome_from_server_ = true;
  }

  // ---- Response semantics: gRPC's HTTP/2 mapping. ----

  void OnHeadersComplete(bool end_stream) {
    if (!have_response_) {
      if (block_.http_status >= 100 && block_.http_status < 200) return;  // interim response
      have_response_ = true;
      return OnResponseHeaders(end_stream);
    }
    // nghttp2 accepts a second HEADERS only as trailers, which end the stream.
    if (!block_.grpc_status) {
      return Decide(Local(GrpcCode::kInternal, "server sent trailers without grpc-status"));
    }
    DecideFromGrpcStatus();
  }

  void OnResponseHeaders(bool end_stream) {
    if (end_stream && block_.grpc_status) return DecideFromGrpcStatus();  // trailers-only
    if (block_.http_status != 200) {
      return DecideFromServer(GrpcCodeFromHttpStatus(block_.http_status),
                              "unexpected HTTP status code received from server: " +
                                  std::to_string(block_.http_status));
    }
    if (!block_.content_type) {
      return DecideFromServer(GrpcCode::kUnknown, "server response has no content-type");
    }
    if (!IsGrpcContentType(*block_.content_type)) {
      return DecideFromServer(GrpcCode::kUnknown, "unexpected content-type \"" +
                                                      Printable(*block_.content_type) + "\"");
    }
    if (end_stream) return Decide(MissingTrailers());
    grpc_mode_ = true;
  }

  void DecideFromGrpcStatus() {
    auto code = ParseGrpcStatus(*block_.grpc_status);
    if (!code) {
      return Decide(Local(GrpcCode::kInternal,
                          "malformed grpc-status \"" + Printable(*block_.grpc_status) + "\""));
    }
    std::string message = PercentDecode(block_.grpc_message);
    if (*code == GrpcCode::kOk) {
      if (auto bad_body = decoder_.Finish()) return Decide(*bad_body);
    }
    DecideFromServer(*code, std::move(message));
  }

  static GrpcStatus MissingTrailers() {
    return Local(GrpcCode::kInternal, "server closed the stream without sending trailers");
  }

  void OnStreamReset(uint32_t error_code, bool received) {
    std::string message = received ? "stream terminated by RST_STREAM with error code: "
                                   : "stream closed with error code: ";
    message += nghttp2_http2_strerror(error_code);
    if (!received && !last_error_.empty()) message += " (" + last_error_ + ")";
    Decide(Local(CodeForHttp2Error(error_code, deadline_), std::move(message)));
  }

  void OnGoaway(const nghttp2_goaway& goaway) {
    goaway_ = true;
    if (goaway.last_stream_id >= stream_id_) return;  // our stream will still be answered
    std::string message = std::string("server sent GOAWAY (") +
                          nghttp2_http2_strerror(goaway.error_code) + ") before responding";
    std::string_view debug(reinterpret_cast<const char*>(goaway.opaque_data),
                           goaway.opaque_data_len);
    if (!debug.empty()) message += ": " + Printable(debug);
    Decide(Local(GrpcCode::kUnavailable, std::move(message)));
  }

  // ---- nghttp2 callbacks. They never fail the session: decisions go through Decide(). ----

  static UnaryCall& Self(void* user_data) { return *static_cast<UnaryCall*>(user_data); }

  static ssize_t OnSend(nghttp2_session*, const uint8_t* data, size_t length, int, void* ud) {
    Self(ud).out_.append(reinterpret_cast<const char*>(data), length);
    return static_cast<ssize_t>(length);
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source*, void* ud) {
    UnaryCall& self = Self(ud);
    size_t n = std::min(length, self.body_.size() - self.body_sent_);
    std::memcpy(buf, self.body_.data() + self.body_sent_, n);
    self.body_sent_ += n;
    if (self.body_sent_ == self.body_.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    UnaryCall& self = Self(ud);
    if (frame->hd.stream_id == self.stream_id_) self.block_ = HeaderBlock();
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* ud) {
    UnaryCall& self = Self(ud);
    if (frame->hd.stream_id != self.stream_id_) return 0;
    std::string_view key(reinterpret_cast<const char*>(name), namelen);
    std::string_view val(reinterpret_cast<const char*>(value), valuelen);
    HeaderBlock& block = self.block_;
    if (key == ":status") {
      block.http_status = 0;  // nghttp2 has checked it is three digits
      for (char c : val) block.http_status = block.http_status * 10 + (c - '0');
    } else if (key == "content-type") {
      block.content_type = std::string(val);
    } else if (key == "grpc-status") {
      block.grpc_status = std::string(val);
    } else if (key == "grpc-message") {
      block.grpc_message = std::string(val);
    }
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    UnaryCall& self = Self(ud);
    bool ours = frame->hd.stream_id == self.stream_id_;
    bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        if (ours) self.OnHeadersComplete(end_stream);
        break;
      case NGHTTP2_DATA:
        if (ours && end_stream && self.grpc_mode_) self.Decide(MissingTrailers());
        break;
      case NGHTTP2_RST_STREAM:
        if (ours) self.OnStreamReset(frame->rst_stream.error_code, true);
        break;
      case NGHTTP2_GOAWAY:
        self.OnGoaway(frame->goaway);
        break;
      default:
        break;
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t len, void* ud) {
    UnaryCall& self = Self(ud);
    if (stream_id != self.stream_id_ || !self.grpc_mode_ || self.outcome_) return 0;
    auto error = self.decoder_.Feed(std::string_view(reinterpret_cast<const char*>(data), len));
    if (error) self.Decide(*error);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* ud) {
    UnaryCall& self = Self(ud);
    if (stream_id != self.stream_id_ || self.outcome_) return 0;
    if (error_code != NGHTTP2_NO_ERROR) {
      self.OnStreamReset(error_code, false);
    } else {
      self.Decide(Local(GrpcCode::kInternal, "stream closed without a complete response"));
    }
    return 0;
  }

  static int OnInvalidFrame(nghttp2_session*, const nghttp2_frame*, int lib_error, void* ud) {
    Self(ud).last_error_ = nghttp2_strerror(lib_error);
    return 0;
  }

  static int OnError(nghttp2_session*, int, const char* msg, size_t len, void* ud) {
    Self(ud).last_error_.assign(msg, len);
    return 0;
  }

  ByteStream& stream_;
  const UnaryRequest& request_;
  Deadline deadline_;
  nghttp2_session* session_ = nullptr;
  int32_t stream_id_ = -1;
  std::string body_;  // the length-prefixed request message
  size_t body_sent_ = 0;
  std::string out_;  // bytes nghttp2 produced that are not written yet
  HeaderBlock block_;
  bool have_response_ = false;
  bool grpc_mode_ = false;  // response headers said gRPC: DATA is length-prefixed messages
  bool goaway_ = false;
  MessageDecoder decoder_;
  std::string last_error_;   // nghttp2's latest complaint, for messages
  std::string write_error_;  // set once a write failed
  std::optional<GrpcStatus> outcome_;
  bool outcome_from_server_ = false;
};

}  // namespace

UnaryResponse CallUnary(ByteStream& stream, const UnaryRequest& request, Deadline deadline) {
  try {
    UnaryCall call(stream, request, deadline);
    return call.Run();
  } catch (const std::exception& e) {
    return {Local(GrpcCode::kInternal, std::string("unary call failed: ") + e.what()), {}};
  }
}

}  // namespace hotfix::wire
