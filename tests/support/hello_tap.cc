#include "hello_tap.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "openssl_util.h"
#include "socket_util.h"

namespace hotfix::testsupport {
namespace {

constexpr size_t kMaxHelloBytes = 128 * 1024;
constexpr auto kHelloTimeout = std::chrono::seconds(10);

// Reads a 2-byte big-endian length.
size_t Be16(const unsigned char* p) { return static_cast<size_t>(p[0]) << 8 | p[1]; }

// server_name extension: list length(2), then entries type(1) length(2) name; type 0 = DNS.
std::string ParseSni(const unsigned char* data, size_t len) {
  if (len < 2) return {};
  size_t end = std::min(len, 2 + Be16(data));
  for (size_t pos = 2; pos + 3 <= end;) {
    size_t name_len = Be16(data + pos + 1);
    if (pos + 3 + name_len > end) break;
    if (data[pos] == 0) return std::string(reinterpret_cast<const char*>(data + pos + 3), name_len);
    pos += 3 + name_len;
  }
  return {};
}

// ALPN extension: list length(2), then entries length(1) name.
std::vector<std::string> ParseAlpn(const unsigned char* data, size_t len) {
  std::vector<std::string> out;
  if (len < 2) return out;
  size_t end = std::min(len, 2 + Be16(data));
  for (size_t pos = 2; pos < end;) {
    size_t n = data[pos];
    if (pos + 1 + n > end) break;
    out.emplace_back(reinterpret_cast<const char*>(data + pos + 1), n);
    pos += 1 + n;
  }
  return out;
}

struct ParseState {
  ClientHelloInfo info;
  bool callback_ran = false;
};

// Records the extensions, then fails the handshake on purpose: the bytes are only parsed.
int OnClientHello(SSL* ssl, int* alert, void*) {
  auto* state = static_cast<ParseState*>(SSL_get_app_data(ssl));
  state->callback_ran = true;
  ClientHelloInfo* info = &state->info;
  const unsigned char* data = nullptr;
  size_t len = 0;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &data, &len)) {
    info->sni = ParseSni(data, len);
  }
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &data,
                                &len)) {
    info->has_alpn_extension = true;
    info->alpn = ParseAlpn(data, len);
  }
  *alert = SSL_AD_USER_CANCELLED;
  return SSL_CLIENT_HELLO_ERROR;
}

// A parse-only server context: every protocol version, no certificate needed.
SSL_CTX* ParserContext() {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_security_level(c, 0);
    SSL_CTX_set_min_proto_version(c, 0);
    SSL_CTX_set_client_hello_cb(c, OnClientHello, nullptr);
    return c;
  }();
  return ctx;
}

// Reads from fd until the buffered bytes hold a whole ClientHello, or that becomes hopeless.
TappedConnection ReadHello(int fd, std::string* buffered) {
  TappedConnection conn;
  while (buffered->size() < kMaxHelloBytes) {
    if (!net::WaitReadable(fd, kHelloTimeout)) {
      conn.error = "timed out waiting for a ClientHello";
      return conn;
    }
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      conn.error = "client closed before a complete ClientHello";
      return conn;
    }
    buffered->append(buf, static_cast<size_t>(n));
    HelloParse r = ParseClientHello(*buffered, &conn.hello, &conn.error);
    if (r == HelloParse::kComplete) conn.parsed = true;
    if (r != HelloParse::kNeedMore) return conn;
  }
  conn.error = "ClientHello larger than the tap accepts";
  return conn;
}

}  // namespace

HelloParse ParseClientHello(std::string_view bytes, ClientHelloInfo* info, std::string* error) {
  ossl::SslPtr ssl(SSL_new(ParserContext()));
  BIO* in = BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size()));
  BIO_set_mem_eof_return(in, -1);  // "no more data yet" instead of EOF
  SSL_set_bio(ssl.get(), in, BIO_new(BIO_s_mem()));
  SSL_set_accept_state(ssl.get());
  ParseState state;
  SSL_set_app_data(ssl.get(), &state);
  int rc = SSL_do_handshake(ssl.get());
  int err = SSL_get_error(ssl.get(), rc);
  std::string errors = ossl::DrainErrors();
  if (state.callback_ran) {
    *info = state.info;
    return HelloParse::kComplete;
  }
  if (err == SSL_ERROR_WANT_READ) return HelloParse::kNeedMore;
  *error = "not a TLS ClientHello: " + errors;
  return HelloParse::kNotTls;
}

HelloTap::HelloTap(std::string upstream_host, uint16_t upstream_port, uint16_t listen_port)
    : upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port) {
  server_ = std::make_unique<net::ConnectionServer>("127.0.0.1", listen_port,
                                                    [this](int fd) { HandleConnection(fd); });
}

HelloTap::~HelloTap() { server_->Stop(); }

uint16_t HelloTap::port() const { return server_->port(); }

void HelloTap::HandleConnection(int fd) {
  std::string buffered;
  TappedConnection conn = ReadHello(fd, &buffered);
  int upstream = net::ConnectTcp(upstream_host_, upstream_port_);
  conn.upstream_connected = upstream >= 0;
  if (upstream < 0)
    conn.error +=
        (conn.error.empty() ? "" : "; ") + std::string("upstream: ") + std::strerror(errno);
  connections_.Add(conn);
  if (upstream < 0) return;
  if (net::SendAll(upstream, buffered.data(), buffered.size())) {
    net::Relay(fd, upstream, server_->stopping());
  }
  close(upstream);
}

std::vector<TappedConnection> HelloTap::connections() const { return connections_.All(); }

size_t HelloTap::connection_count() const { return connections_.size(); }

bool HelloTap::WaitForConnections(size_t n, std::chrono::milliseconds timeout) const {
  return connections_.WaitFor(n, timeout);
}

void HelloTap::ClearConnections() { connections_.Clear(); }

}  // namespace hotfix::testsupport
