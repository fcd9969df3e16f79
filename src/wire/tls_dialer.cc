#include "wire/tls_dialer.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <utility>

#include "common/host_port.h"
#include "common/openssl.h"
#include "common/text.h"
#include "wire/tcp.h"

namespace hotfix::wire {
namespace {

constexpr size_t kMaxProxyHeader = 16 * 1024;

using ossl::SslCtxPtr;
using ossl::SslPtr;
using ossl::X509Ptr;

// Peer-supplied text is echoed into messages with at most this many bytes.
constexpr size_t kMaxEchoedBytes = 200;

// ---- Options and the TLS context. ----

Status ValidateOptions(const TlsDialOptions& o) {
  if (o.host.empty()) return Status::InvalidArgument("no host to dial");
  if (o.verify_name.empty()) return Status::InvalidArgument("no server name to verify");
  if (o.required_alpn.empty() != o.alpn.empty()) {
    return Status::InvalidArgument("a required ALPN protocol goes with an offered list");
  }
  if (o.system_trust_store && (!o.ca_pem.empty() || o.trust_anchors)) {
    return Status::InvalidArgument("the system trust store or a CA, not both");
  }
  for (const std::string& proto : o.alpn) {
    if (proto.empty() || proto.size() > 255) {
      return Status::InvalidArgument("ALPN protocol names must be 1 to 255 bytes");
    }
  }
  return Status::Ok();
}

std::string AlpnWireList(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const std::string& proto : protocols) {
    wire.push_back(static_cast<char>(proto.size()));
    wire += proto;
  }
  return wire;
}

StatusOr<SslCtxPtr> MakeContext(const TlsDialOptions& o, const TrustAnchors& anchors) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return Status::Internal("SSL_CTX_new: " + ossl::DrainErrors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // TLS 1.2 suites as grpc-go's: ECDHE with AEAD only (RFC 7540 §9.2.2 for h2).
  if (SSL_CTX_set_cipher_list(ctx.get(), "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) {
    return Status::Internal("setting TLS 1.2 cipher suites: " + ossl::DrainErrors());
  }
  // A TCP close without close_notify reads as end of stream, as in Go; HTTP/2 framing
  // detects a truncated response by itself.
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  // HTTP/2 forbids renegotiation (RFC 7540 §9.2.1) and Go's client never renegotiates: a TLS
  // 1.2 server asking for one gets a no_renegotiation alert instead of more handshakes.
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);

  if (o.system_trust_store) {
    if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
      return Status::Internal("loading the system trust store: " + ossl::DrainErrors());
    }
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());  // else empty: no system roots
  for (const X509Ptr& cert : anchors) {
    if (X509_STORE_add_cert(store, cert.get()) != 1) {
      return Status::Internal("adding the cluster CA: " + ossl::DrainErrors());
    }
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx.get());
  // Go checks only the SAN, never the CN, and allows only whole-label wildcards.
  X509_VERIFY_PARAM_set_hostflags(
      param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  // An IP literal is matched against the IP SANs, a name against the DNS SANs: Go's
  // VerifyHostname, which the reference's standard verification uses since AgentBaker #9351.
  const bool by_ip = IsIpLiteral(o.verify_name);
  const int named =
      by_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, o.verify_name.c_str())
            : X509_VERIFY_PARAM_set1_host(param, o.verify_name.data(), o.verify_name.size());
  if (named != 1 || X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER) != 1) {
    return Status::Internal("configuring certificate verification: " + ossl::DrainErrors());
  }
  std::string alpn = AlpnWireList(o.alpn);
  if (!alpn.empty() &&
      SSL_CTX_set_alpn_protos(ctx.get(), reinterpret_cast<const unsigned char*>(alpn.data()),
                              static_cast<unsigned>(alpn.size())) != 0) {  // 0 is success here
    return Status::Internal("setting ALPN: " + ossl::DrainErrors());
  }
  return ctx;
}

// ---- HTTP CONNECT through a proxy. ----

// Reads the response header and not one byte more: what follows belongs to the tunnel.
StatusOr<std::string> ReadHeaderBlock(int fd, Deadline deadline) {
  std::string header;
  char buf[1024];
  while (true) {
    size_t room = std::min(sizeof(buf), kMaxProxyHeader - header.size());
    if (room == 0) return Status::Unavailable("proxy response header exceeds 16 KiB");
    ssize_t n = recv(fd, buf, room, MSG_PEEK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Status ready = WaitFd(fd, POLLIN, deadline); !ready.ok()) return ready;
      continue;
    }
    if (n < 0) return Status::Unavailable(strerror(errno));
    if (n == 0) return Status::Unavailable("proxy closed the connection");
    size_t scan_from = header.size() < 3 ? 0 : header.size() - 3;
    std::string combined = header + std::string(buf, static_cast<size_t>(n));
    size_t end = combined.find("\r\n\r\n", scan_from);
    size_t take = end == std::string::npos ? static_cast<size_t>(n) : end + 4 - header.size();
    if (recv(fd, buf, take, 0) != static_cast<ssize_t>(take)) {
      return Status::Unavailable("reading the proxy response failed");
    }
    header.append(buf, take);
    if (end != std::string::npos) return header;
  }
}

Status ProxyConnect(int fd, const TlsDialOptions& o, Deadline deadline) {
  const ProxyConfig& proxy = *o.proxy;
  std::string target = JoinHostPort(o.host, o.port);
  std::string step = "proxy CONNECT to " + target + " via " + JoinHostPort(proxy.host, proxy.port);
  std::string request = "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n";
  if (!proxy.proxy_authorization.empty()) {
    request += "Proxy-Authorization: " + proxy.proxy_authorization + "\r\n";
  }
  request += "\r\n";
  Status sent = SendAll(fd, request, deadline);
  auto header = sent.ok() ? ReadHeaderBlock(fd, deadline) : StatusOr<std::string>(sent);
  if (!header.ok()) {
    if (header.status().code() == Status::Code::kDeadlineExceeded) {
      return Status::DeadlineExceeded(step + " timed out");
    }
    return header.status().Annotate(step);
  }
  std::string_view status_line = std::string_view(*header).substr(0, header->find("\r\n"));
  // "HTTP/1.x 2xx ..."
  bool ok = status_line.size() >= 12 && status_line.substr(0, 7) == "HTTP/1." &&
            status_line[8] == ' ' && status_line[9] == '2' && IsAsciiDigit(status_line[10]) &&
            IsAsciiDigit(status_line[11]);
  if (!ok) {
    return Status::Unavailable(step + " failed: proxy answered \"" +
                               EscapeForMessage(status_line, kMaxEchoedBytes) + "\"");
  }
  return Status::Ok();
}

// ---- A socket BIO that never raises SIGPIPE: OpenSSL's own uses write(2). ----

int SendNoSignal(BIO* bio, const char* data, int len) {
  int fd = -1;
  BIO_get_fd(bio, &fd);
  ssize_t n = send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  BIO_clear_retry_flags(bio);
  if (n <= 0 && BIO_sock_should_retry(static_cast<int>(n))) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

// Everything but the write comes from OpenSSL's socket BIO. Created once, never freed.
const BIO_METHOD* NoSigpipeSocketMethod() {
  static BIO_METHOD* method = [] {
    const BIO_METHOD* base = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "socket without SIGPIPE");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, SendNoSignal);
    BIO_meth_set_read(m, BIO_meth_get_read(base));
    BIO_meth_set_puts(m, BIO_meth_get_puts(base));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));
    BIO_meth_set_create(m, BIO_meth_get_create(base));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
    return m;
  }();
  return method;
}

// ---- The established stream. ----

// What went wrong in an SSL call, for a message.
std::string SslFailure(int ssl_error, int saved_errno) {
  std::string queued = ossl::DrainErrors();
  if (!queued.empty()) return queued;
  if (ssl_error == SSL_ERROR_SYSCALL && saved_errno != 0) return strerror(saved_errno);
  if (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN) {
    return "connection closed by peer";
  }
  return "SSL error " + std::to_string(ssl_error);
}

class OpenSslStream final : public TlsStream {
 public:
  OpenSslStream(UniqueFd fd, SslPtr ssl, std::string alpn, std::string peer)
      : fd_(std::move(fd)), ssl_(std::move(ssl)), alpn_(std::move(alpn)), peer_(std::move(peer)) {}
  ~OpenSslStream() override {
    // Best effort close_notify; non-blocking, so it never waits for the peer.
    ERR_clear_error();
    SSL_shutdown(ssl_.get());
    ERR_clear_error();
  }

  Status WriteAll(std::string_view data, Deadline deadline) override {
    while (!data.empty()) {
      int chunk = static_cast<int>(std::min<size_t>(data.size(), 1 << 30));
      ERR_clear_error();
      // After WANT_*, OpenSSL requires the same buffer again: data is unchanged until success.
      int n = SSL_write(ssl_.get(), data.data(), chunk);
      int saved_errno = errno;
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (Status waited = Wait(SSL_get_error(ssl_.get(), n), saved_errno, deadline, "writing to ");
          !waited.ok()) {
        return waited;
      }
    }
    return Status::Ok();
  }

  StatusOr<size_t> ReadSome(char* buf, size_t len, Deadline deadline) override {
    while (true) {
      ERR_clear_error();
      // Buffered plaintext (SSL_pending) is returned here without touching the socket.
      int n = SSL_read(ssl_.get(), buf, static_cast<int>(std::min<size_t>(len, 1 << 30)));
      int saved_errno = errno;
      if (n > 0) return static_cast<size_t>(n);
      int error = SSL_get_error(ssl_.get(), n);
      if (error == SSL_ERROR_ZERO_RETURN) return size_t{0};
      if (error == SSL_ERROR_SYSCALL && saved_errno == 0 && ERR_peek_error() == 0) {
        return size_t{0};  // EOF without close_notify
      }
      if (Status waited = Wait(error, saved_errno, deadline, "reading from "); !waited.ok()) {
        return waited;
      }
    }
  }

  const std::string& selected_alpn() const override { return alpn_; }
  std::string protocol_version() const override { return SSL_get_version(ssl_.get()); }

 private:
  // Ok once the socket is ready for what OpenSSL asked; otherwise the failure.
  Status Wait(int ssl_error, int saved_errno, Deadline deadline, const std::string& what) {
    short events = ssl_error == SSL_ERROR_WANT_READ    ? POLLIN
                   : ssl_error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                       : 0;
    if (events == 0)
      return Status::Unavailable(what + peer_ + ": " + SslFailure(ssl_error, saved_errno));
    Status ready = WaitFd(fd_.get(), events, deadline);
    if (ready.code() == Status::Code::kDeadlineExceeded) {
      return Status::DeadlineExceeded(what + peer_ + " timed out");
    }
    return ready;
  }

  UniqueFd fd_;  // declared first: closed after ssl_ is freed
  SslPtr ssl_;
  std::string alpn_;
  std::string peer_;
};

// ---- The handshake. ----

StatusOr<std::unique_ptr<TlsStream>> Handshake(UniqueFd fd, SSL_CTX* ctx, const TlsDialOptions& o,
                                               Deadline deadline) {
  std::string peer = JoinHostPort(o.host, o.port);
  SslPtr ssl(SSL_new(ctx));
  BIO* bio = NoSigpipeSocketMethod() ? BIO_new(NoSigpipeSocketMethod()) : nullptr;
  if (!ssl || bio == nullptr) {
    BIO_free(bio);
    return Status::Internal("creating the TLS session: " + ossl::DrainErrors());
  }
  BIO_set_fd(bio, fd.get(), BIO_NOCLOSE);
  SSL_set_bio(ssl.get(), bio, bio);  // ssl owns bio now
  if (!o.sni.empty() && !IsIpLiteral(o.sni) &&
      SSL_set_tlsext_host_name(ssl.get(), o.sni.c_str()) != 1) {
    return Status::InvalidArgument("invalid SNI: " + ossl::DrainErrors());
  }
  while (true) {
    ERR_clear_error();
    int rv = SSL_connect(ssl.get());
    int saved_errno = errno;
    if (rv == 1) break;
    int error = SSL_get_error(ssl.get(), rv);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      long verify = SSL_get_verify_result(ssl.get());
      if (verify != X509_V_OK) {
        ERR_clear_error();
        return Status::PermissionDenied(std::string("server certificate verification failed: ") +
                                        X509_verify_cert_error_string(verify));
      }
      return Status::Unavailable("TLS handshake with " + peer +
                                 " failed: " + SslFailure(error, saved_errno));
    }
    Status ready = WaitFd(fd.get(), error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
    if (ready.code() == Status::Code::kDeadlineExceeded) {
      return Status::DeadlineExceeded("TLS handshake with " + peer + " timed out");
    }
    if (!ready.ok()) return ready.Annotate("TLS handshake with " + peer);
  }
  const unsigned char* selected = nullptr;
  unsigned selected_len = 0;
  SSL_get0_alpn_selected(ssl.get(), &selected, &selected_len);
  std::string alpn(reinterpret_cast<const char*>(selected), selected_len);
  if (!o.required_alpn.empty() && alpn != o.required_alpn) {
    return Status::Unavailable("server selected ALPN " +
                               (alpn.empty() ? "none" : EscapeForMessage(alpn, kMaxEchoedBytes)) +
                               ", need " + o.required_alpn);
  }
  return std::unique_ptr<TlsStream>(
      new OpenSslStream(std::move(fd), std::move(ssl), std::move(alpn), std::move(peer)));
}

}  // namespace

// ---- Trust anchors: every CERTIFICATE block, as Go's CertPool.AppendCertsFromPEM. ----

StatusOr<TrustAnchors> ParseTrustAnchors(const std::string& ca_pem) {
  if (ca_pem.empty()) {
    return Status::InvalidArgument(
        "cluster CA unavailable; refusing to connect over unverified TLS");
  }
  StatusOr<TrustAnchors> certs = ossl::ParsePemCertificates(ca_pem);
  if (certs.status().code() == Status::Code::kInvalidArgument) {
    return Status::InvalidArgument("failed to parse cluster CA PEM");
  }
  return certs;
}

StatusOr<std::unique_ptr<TlsStream>> DialTls(const TlsDialOptions& options, Deadline deadline) {
  if (Status valid = ValidateOptions(options); !valid.ok()) return valid;
  // OpenSSL 3 spends milliseconds fetching algorithms for a process's first context: build it
  // while the name resolves and the TCP connection opens. (The future joins on every return.)
  auto ctx_future = std::async(std::launch::async, [&options]() -> StatusOr<SslCtxPtr> {
    if (options.system_trust_store) return MakeContext(options, TrustAnchors());
    if (options.trust_anchors) return MakeContext(options, *options.trust_anchors);
    StatusOr<TrustAnchors> anchors = ParseTrustAnchors(options.ca_pem);
    if (!anchors.ok()) return anchors.status();
    return MakeContext(options, *anchors);
  });
  auto cancelled = [&options] { return options.cancelled != nullptr && *options.cancelled; };

  // Through a proxy, only the proxy is resolved: it resolves the target itself.
  const std::string& dial_host = options.proxy ? options.proxy->host : options.host;
  uint16_t dial_port = options.proxy ? options.proxy->port : options.port;
  std::string label = options.proxy ? "proxy " : "";
  auto fd = DialTcp(dial_host, dial_port, deadline, label);
  auto ctx = ctx_future.get();
  if (!ctx.ok()) return ctx.status();
  if (!fd.ok()) return fd.status();
  if (cancelled()) return Status::Unavailable("dial cancelled");
  if (options.proxy) {
    if (Status tunnel = ProxyConnect(fd->get(), options, deadline); !tunnel.ok()) return tunnel;
    if (cancelled()) return Status::Unavailable("dial cancelled");
  }
  return Handshake(std::move(fd).value(), ctx->get(), options, deadline);
}

}  // namespace hotfix::wire
