#include "tls_peer.h"

#include <sys/socket.h>

#include <cstring>
#include <thread>

#include "openssl_util.h"
#include "socket_util.h"

namespace hotfix::testsupport {

struct TlsPeer::SslContext {
  ossl::SslCtxPtr ctx;
};

namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(30);

std::vector<std::string> SplitAlpnWire(const unsigned char* in, unsigned int len) {
  std::vector<std::string> out;
  for (unsigned int pos = 0; pos < len && pos + 1 + in[pos] <= len; pos += 1 + in[pos]) {
    out.emplace_back(reinterpret_cast<const char*>(in + pos + 1), in[pos]);
  }
  return out;
}

// What the client offered, kept on the SSL for the connection's record; the callbacks fill it.
struct Offer {
  bool client_hello = false;
  std::vector<std::string> alpn;
};

int NoteClientHello(SSL* ssl, int*, void*) {
  static_cast<Offer*>(SSL_get_app_data(ssl))->client_hello = true;
  return SSL_CLIENT_HELLO_SUCCESS;
}

int SelectH2(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
             unsigned int inlen, void*) {
  static_cast<Offer*>(SSL_get_app_data(ssl))->alpn = SplitAlpnWire(in, inlen);
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kH2, sizeof(kH2), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // no h2 offered: finish without ALPN, like Envoy/apiserver
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

int SelectHttp11Regardless(SSL* ssl, const unsigned char** out, unsigned char* outlen,
                           const unsigned char* in, unsigned int inlen, void*) {
  static_cast<Offer*>(SSL_get_app_data(ssl))->alpn = SplitAlpnWire(in, inlen);
  static const unsigned char kHttp11[] = "http/1.1";
  *out = kHttp11;
  *outlen = 8;
  return SSL_TLSEXT_ERR_OK;
}

int SelectAksLivePatchingRegardless(SSL* ssl, const unsigned char** out, unsigned char* outlen,
                                    const unsigned char* in, unsigned int inlen, void*) {
  static_cast<Offer*>(SSL_get_app_data(ssl))->alpn = SplitAlpnWire(in, inlen);
  static const unsigned char kAksLivePatching[] = "aks-live-patching";
  *out = kAksLivePatching;
  *outlen = sizeof(kAksLivePatching) - 1;
  return SSL_TLSEXT_ERR_OK;
}

int RecordOfferOnly(SSL* ssl, const unsigned char**, unsigned char*, const unsigned char* in,
                    unsigned int inlen, void*) {
  static_cast<Offer*>(SSL_get_app_data(ssl))->alpn = SplitAlpnWire(in, inlen);
  return SSL_TLSEXT_ERR_NOACK;
}

ossl::SslCtxPtr MakeContext(const TlsPeerOptions& options) {
  ossl::SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  ossl::Check(ctx != nullptr, "SSL_CTX_new");
  ossl::UseCertAndKey(ctx.get(), options.cert.cert_pem, options.cert.key_pem);
  SSL_CTX_set_client_hello_cb(ctx.get(), NoteClientHello, nullptr);
  switch (options.mode) {
    case TlsPeerMode::kAcceptOnly:
      break;
    case TlsPeerMode::kNoAlpn:
      SSL_CTX_set_alpn_select_cb(ctx.get(), RecordOfferOnly, nullptr);
      break;
    case TlsPeerMode::kSelectHttp11:
      SSL_CTX_set_alpn_select_cb(ctx.get(), SelectHttp11Regardless, nullptr);
      break;
    case TlsPeerMode::kSelectAksLivePatching:
      SSL_CTX_set_alpn_select_cb(ctx.get(), SelectAksLivePatchingRegardless, nullptr);
      break;
    case TlsPeerMode::kTls11Only:
      // OpenSSL 3 refuses TLS < 1.2 above security level 0 (SHA-1/MD5 in the handshake).
      SSL_CTX_set_security_level(ctx.get(), 0);
      ossl::Check(SSL_CTX_set_cipher_list(ctx.get(), "DEFAULT:@SECLEVEL=0") == 1, "ciphers");
      SSL_CTX_set_min_proto_version(ctx.get(), TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx.get(), TLS1_1_VERSION);
      SSL_CTX_set_alpn_select_cb(ctx.get(), SelectH2, nullptr);
      break;
    case TlsPeerMode::kSelectH2Silent:
      SSL_CTX_set_alpn_select_cb(ctx.get(), SelectH2, nullptr);
      break;
    case TlsPeerMode::kSelectH2Tls12:
      SSL_CTX_set_max_proto_version(ctx.get(), TLS1_2_VERSION);
      SSL_CTX_set_alpn_select_cb(ctx.get(), SelectH2, nullptr);
      break;
  }
  return ctx;
}

// Reads and drops everything until the client closes or the server stops (shutdown wakes it).
void DrainUntilClosed(int fd) {
  char buf[4096];
  while (recv(fd, buf, sizeof(buf), 0) > 0) {
  }
}

void DrainTlsUntilClosed(SSL* ssl) {
  char buf[4096];
  while (SSL_read(ssl, buf, sizeof(buf)) > 0) {
  }
}

void EchoUntilClosed(SSL* ssl) {
  char buf[16384];
  for (int n; (n = SSL_read(ssl, buf, sizeof(buf))) > 0;) {
    if (SSL_write(ssl, buf, n) <= 0) return;
  }
}

// After a successful handshake; the server closes fd once this returns.
void AfterHandshake(TlsPeerAfterHandshake after, SSL* ssl, int fd) {
  switch (after) {
    case TlsPeerAfterHandshake::kDrain:
      return DrainTlsUntilClosed(ssl);
    case TlsPeerAfterHandshake::kEcho:
      return EchoUntilClosed(ssl);
    case TlsPeerAfterHandshake::kCloseNotify:
      SSL_shutdown(ssl);
      return;
    case TlsPeerAfterHandshake::kRenegotiate:
      ossl::Check(SSL_renegotiate(ssl) == 1, "SSL_renegotiate");
      if (SSL_do_handshake(ssl) != 1) return;  // sends the HelloRequest
      return DrainTlsUntilClosed(ssl);
    case TlsPeerAfterHandshake::kReset: {
      linger abort_on_close{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
      return;
    }
  }
}

std::string SelectedAlpn(SSL* ssl) {
  const unsigned char* p = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl, &p, &len);
  return std::string(reinterpret_cast<const char*>(p), len);
}

}  // namespace

TlsPeer::TlsPeer(TlsPeerOptions options) : mode_(options.mode), after_(options.after) {
  if (mode_ != TlsPeerMode::kAcceptOnly) {
    ctx_ = std::make_unique<SslContext>(SslContext{MakeContext(options)});
  }
  server_ = std::make_unique<net::ConnectionServer>("127.0.0.1", options.port,
                                                    [this](int fd) { HandleConnection(fd); });
}

TlsPeer::~TlsPeer() { server_->Stop(); }

uint16_t TlsPeer::port() const { return server_->port(); }
size_t TlsPeer::accepted_count() const { return server_->accepted_count(); }

void TlsPeer::HandleConnection(int fd) {
  {
    // accepted_count() moved; taking the lock orders this wake-up after a waiter's check.
    std::lock_guard<std::mutex> lock(mu_);
  }
  changed_.notify_all();
  if (mode_ == TlsPeerMode::kAcceptOnly) {
    DrainUntilClosed(fd);
    return;
  }
  // A stuck client must not hold a handler thread forever.
  timeval tv{static_cast<time_t>(kHandshakeTimeout.count()), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ossl::SslPtr ssl(SSL_new(ctx_->ctx.get()));
  Offer offer;
  SSL_set_app_data(ssl.get(), &offer);
  SSL_set_fd(ssl.get(), fd);
  TlsPeerConnection conn;
  conn.handshake_ok = SSL_accept(ssl.get()) == 1;
  conn.client_hello = offer.client_hello;
  if (!conn.handshake_ok) conn.error = ossl::DrainErrors();
  const char* sni = SSL_get_servername(ssl.get(), TLSEXT_NAMETYPE_host_name);
  conn.sni = sni ? sni : "";
  conn.offered_alpn = offer.alpn;
  conn.selected_alpn = SelectedAlpn(ssl.get());
  conn.protocol_version = SSL_get_version(ssl.get());
  bool handshake_ok = conn.handshake_ok;
  connections_.Add(std::move(conn));
  if (handshake_ok) {
    timeval forever{0, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
    AfterHandshake(after_, ssl.get(), fd);
  }
  ossl::DrainErrors();
}

std::vector<TlsPeerConnection> TlsPeer::connections() const { return connections_.All(); }

size_t TlsPeer::connection_count() const { return connections_.size(); }

bool TlsPeer::WaitForConnections(size_t n, std::chrono::milliseconds timeout) const {
  return connections_.WaitFor(n, timeout);
}

bool TlsPeer::WaitForAccepted(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return accepted_count() >= n; });
}

TlsPeerOptions SilentApiserverOptions(const TestCa& ca, const std::string& fqdn) {
  TlsPeerOptions options;
  options.mode = TlsPeerMode::kSelectH2Silent;
  options.cert = IssueLocalServerCert(ca, {fqdn});
  return options;
}

}  // namespace hotfix::testsupport
