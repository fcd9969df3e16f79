#include "raw_h2_server.h"

#include <nghttp2/nghttp2.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>
#include <map>

#include "h2_frames.h"
#include "openssl_util.h"
#include "socket_util.h"

namespace hotfix::testsupport {

struct RawH2Server::SslContext {
  ossl::SslCtxPtr ctx;
};

namespace {

// Bounds how long a stuck client can hold a handler thread; Stop() also wakes it.
constexpr int kIoTimeoutSeconds = 15;
constexpr auto kDrainTimeout = std::chrono::seconds(5);

int SelectH2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
             unsigned int inlen, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kH2, sizeof(kH2), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// A close after this sends RST instead of FIN.
void ResetOnClose(int fd) {
  linger lg{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

// Closing with unread input makes the kernel send RST, which could overtake what we sent
// (a GOAWAY, trailers) at the client. Half-close and wait for the client's own close instead.
void DrainAndHalfClose(int fd) {
  shutdown(fd, SHUT_WR);
  char buf[4096];
  auto give_up = std::chrono::steady_clock::now() + kDrainTimeout;
  while (std::chrono::steady_clock::now() < give_up &&
         net::WaitReadable(fd, std::chrono::milliseconds(200))) {
    if (recv(fd, buf, sizeof(buf), 0) <= 0) return;
  }
}

bool SslWriteAll(SSL* ssl, std::string_view data) {
  while (!data.empty()) {
    int n = SSL_write(ssl, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 20)));
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

std::string RawH2Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "";
}

// One TLS connection driven by an nghttp2 server session on a blocking socket: everything
// nghttp2 queued is written, then the next bytes are read, until either side is done.
class RawH2Server::Connection {
 public:
  Connection(RawH2Server& server, SSL* ssl, int fd, RawH2Reply reply)
      : server_(server), ssl_(ssl), fd_(fd), reply_(std::move(reply)) {}
  ~Connection() { nghttp2_session_del(session_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Run() {
    if (!CreateSession()) return;
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
    char buf[16384];
    for (;;) {
      if (nghttp2_session_send(session_) != 0) return;
      if (!out_.empty() && !SslWriteAll(ssl_, out_)) return;
      out_.clear();
      if (reset_now_) return ResetOnClose(fd_);
      if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) break;
      int n = SSL_read(ssl_, buf, sizeof(buf));
      if (n <= 0) return;
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<uint8_t*>(buf),
                                   static_cast<size_t>(n)) < 0) {
        break;
      }
    }
    DrainAndHalfClose(fd_);
  }

 private:
  struct Stream {
    RawH2Request request;
    size_t body_sent = 0;
  };

  bool CreateSession() {
    nghttp2_session_callbacks* cb = nullptr;
    if (nghttp2_session_callbacks_new(&cb) != 0) return false;
    nghttp2_session_callbacks_set_send_callback(cb, OnSend);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, OnBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(cb, OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, OnDataChunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, OnFrameRecv);
    int rv = nghttp2_session_server_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    return rv == 0;
  }

  void OnRequestComplete(int32_t stream_id) {
    Stream& stream = streams_[stream_id];
    server_.requests_.Add(stream.request);
    switch (reply_.action) {
      case RawH2Action::kRespond:
        return Respond(stream_id);
      case RawH2Action::kGoaway:
        nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, 0, reply_.error_code,
                              reinterpret_cast<const uint8_t*>(reply_.goaway_debug.data()),
                              reply_.goaway_debug.size());
        return;
      case RawH2Action::kRstStream:
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, reply_.error_code);
        return;
      case RawH2Action::kTcpResetAfterRequest:
        reset_now_ = true;
        return;
      case RawH2Action::kTcpResetInHandshake:
        return;  // handled before TLS
    }
  }

  void Respond(int32_t stream_id) {
    HeaderList headers = {{":status", std::to_string(reply_.http_status)}};
    if (reply_.content_type) headers.emplace_back("content-type", *reply_.content_type);
    headers.insert(headers.end(), reply_.headers.begin(), reply_.headers.end());
    std::vector<nghttp2_nv> nv = h2::ToNv(headers);
    if (reply_.headers_only) {
      nghttp2_submit_headers(session_, NGHTTP2_FLAG_END_STREAM, stream_id, nullptr, nv.data(),
                             nv.size(), nullptr);
      return;
    }
    if (reply_.body.empty() && reply_.trailers) {
      // No DATA at all: the response headers, then the trailers.
      nghttp2_submit_headers(session_, NGHTTP2_FLAG_NONE, stream_id, nullptr, nv.data(), nv.size(),
                             nullptr);
      std::vector<nghttp2_nv> trailers = h2::ToNv(*reply_.trailers);
      nghttp2_submit_trailer(session_, stream_id, trailers.data(), trailers.size());
      return;
    }
    nghttp2_data_provider body;
    body.source.ptr = this;
    body.read_callback = ReadBody;
    nghttp2_submit_response(session_, stream_id, nv.data(), nv.size(), &body);
  }

  static Connection& Self(void* user_data) { return *static_cast<Connection*>(user_data); }

  static ssize_t OnSend(nghttp2_session*, const uint8_t* data, size_t length, int, void* ud) {
    Self(ud).out_.append(reinterpret_cast<const char*>(data), length);
    return static_cast<ssize_t>(length);
  }

  static ssize_t ReadBody(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source*, void* ud) {
    Connection& self = Self(ud);
    Stream& stream = self.streams_[stream_id];
    const std::string& body = self.reply_.body;
    size_t n = std::min(length, body.size() - stream.body_sent);
    std::memcpy(buf, body.data() + stream.body_sent, n);
    stream.body_sent += n;
    if (stream.body_sent == body.size()) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (self.reply_.trailers) {
        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        std::vector<nghttp2_nv> nv = h2::ToNv(*self.reply_.trailers);
        nghttp2_submit_trailer(session, stream_id, nv.data(), nv.size());
      }
    }
    return static_cast<ssize_t>(n);
  }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    if (frame->hd.type == NGHTTP2_HEADERS) Self(ud).streams_[frame->hd.stream_id];
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* ud) {
    Self(ud).streams_[frame->hd.stream_id].request.headers.emplace_back(
        std::string(reinterpret_cast<const char*>(name), namelen),
        std::string(reinterpret_cast<const char*>(value), valuelen));
    return 0;
  }

  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t len, void* ud) {
    Self(ud).streams_[stream_id].request.body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    bool request_frame = frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA;
    if (request_frame && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      Self(ud).OnRequestComplete(frame->hd.stream_id);
    }
    return 0;
  }

  RawH2Server& server_;
  SSL* ssl_;
  int fd_;
  RawH2Reply reply_;
  nghttp2_session* session_ = nullptr;
  std::map<int32_t, Stream> streams_;
  std::string out_;
  bool reset_now_ = false;
};

RawH2Server::RawH2Server(RawH2ServerOptions options) : reply_(std::move(options.reply)) {
  net::IgnoreSigpipe();
  ossl::SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  ossl::Check(ctx != nullptr, "SSL_CTX_new");
  ossl::UseCertAndKey(ctx.get(), options.cert.cert_pem, options.cert.key_pem);
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectH2, nullptr);
  ctx_ = std::make_unique<SslContext>(SslContext{std::move(ctx)});
  server_ = std::make_unique<net::ConnectionServer>("127.0.0.1", options.port,
                                                    [this](int fd) { HandleConnection(fd); });
}

RawH2Server::~RawH2Server() { server_->Stop(); }

uint16_t RawH2Server::port() const { return server_->port(); }
size_t RawH2Server::accepted_count() const { return server_->accepted_count(); }

void RawH2Server::SetReply(RawH2Reply reply) {
  std::lock_guard<std::mutex> lock(mu_);
  reply_ = std::move(reply);
}

RawH2Reply RawH2Server::reply() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reply_;
}

std::vector<RawH2Request> RawH2Server::requests() const { return requests_.All(); }

bool RawH2Server::WaitForRequests(size_t n, std::chrono::milliseconds timeout) const {
  return requests_.WaitFor(n, timeout);
}

void RawH2Server::HandleConnection(int fd) {
  timeval tv{kIoTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  RawH2Reply script = reply();
  if (script.action == RawH2Action::kTcpResetInHandshake) {
    char buf[4096];
    if (net::WaitReadable(fd, std::chrono::seconds(kIoTimeoutSeconds))) {
      (void)!recv(fd, buf, sizeof(buf), 0);
    }
    ResetOnClose(fd);
    return;
  }
  ossl::SslPtr ssl(SSL_new(ctx_->ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  if (SSL_accept(ssl.get()) != 1) {
    ossl::DrainErrors();
    return;
  }
  Connection(*this, ssl.get(), fd, std::move(script)).Run();
  ossl::DrainErrors();
}

std::string GrpcFrame(std::string_view message, uint8_t flags,
                      std::optional<uint32_t> declared_length) {
  uint32_t length = declared_length.value_or(static_cast<uint32_t>(message.size()));
  std::string out(5, '\0');
  out[0] = static_cast<char>(flags);
  for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>(length >> (24 - 8 * i));
  out.append(message);
  return out;
}

std::string ComponentConfigResponse(std::string_view config, std::string_view component) {
  std::string out;
  out.push_back(0x0a);  // field 1, length-delimited
  AppendVarint(component.size(), &out);
  out.append(component);
  out.push_back(0x12);  // field 2, length-delimited
  AppendVarint(config.size(), &out);
  out.append(config);
  return out;
}

HeaderList GrpcTrailers(int code, std::string_view message) {
  HeaderList out = {{"grpc-status", std::to_string(code)}};
  if (!message.empty()) out.emplace_back("grpc-message", std::string(message));
  return out;
}

}  // namespace hotfix::testsupport
