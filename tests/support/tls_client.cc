#include "tls_client.h"

#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "openssl_util.h"
#include "socket_util.h"

namespace hotfix::testsupport {
namespace {

std::string AlpnWire(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const auto& p : protocols) {
    wire += static_cast<char>(p.size());
    wire += p;
  }
  return wire;
}

void TrustOnly(SSL_CTX* ctx, const std::string& ca_pem) {
  ossl::BioPtr bio(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())));
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
  }
  ERR_clear_error();  // the loop ends on a queued "no start line"
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
}

ossl::SslCtxPtr MakeClientContext(const TlsClientOptions& options) {
  ossl::SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  ossl::Check(ctx != nullptr, "SSL_CTX_new");
  if (options.min_version != 0 && options.min_version < TLS1_2_VERSION) {
    SSL_CTX_set_security_level(ctx.get(), 0);
    SSL_CTX_set_cipher_list(ctx.get(), "DEFAULT:@SECLEVEL=0");
  }
  if (!options.cipher_list.empty()) {
    ossl::Check(SSL_CTX_set_cipher_list(ctx.get(), options.cipher_list.c_str()) == 1,
                "SSL_CTX_set_cipher_list");
  }
  if (options.min_version) SSL_CTX_set_min_proto_version(ctx.get(), options.min_version);
  if (options.max_version) SSL_CTX_set_max_proto_version(ctx.get(), options.max_version);
  if (!options.ca_pem.empty()) TrustOnly(ctx.get(), options.ca_pem);
  return ctx;
}

void Configure(SSL* ssl, const TlsClientOptions& options) {
  if (!options.sni.empty()) SSL_set_tlsext_host_name(ssl, options.sni.c_str());
  if (!options.alpn.empty()) {
    std::string wire = AlpnWire(options.alpn);
    // Returns 0 on success, unlike most OpenSSL calls.
    SSL_set_alpn_protos(ssl, reinterpret_cast<const unsigned char*>(wire.data()),
                        static_cast<unsigned>(wire.size()));
  }
  std::string name = options.verify_name.empty() ? options.sni : options.verify_name;
  if (!options.ca_pem.empty() && !name.empty()) {
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(ssl, name.c_str());
  }
}

void FillSessionInfo(SSL* ssl, TlsClientResult* result) {
  const unsigned char* alpn = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl, &alpn, &len);
  result->selected_alpn.assign(reinterpret_cast<const char*>(alpn), len);
  result->protocol_version = SSL_get_version(ssl);
  if (X509* peer = SSL_get1_peer_certificate(ssl)) {
    char cn[256] = {0};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof(cn));
    result->peer_common_name = cn;
    X509_free(peer);
  }
}

}  // namespace

TlsClientResult TlsHandshake(const TlsClientOptions& options) {
  TlsClientResult result;
  net::IgnoreSigpipe();
  int fd = net::ConnectTcp(options.host, options.port);
  if (fd < 0) {
    result.error = std::string("connect: ") + std::strerror(errno);
    return result;
  }
  result.tcp_connected = true;
  timeval tv{static_cast<time_t>(options.timeout.count() / 1000),
             static_cast<suseconds_t>(options.timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  ossl::SslCtxPtr ctx = MakeClientContext(options);
  ossl::SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  Configure(ssl.get(), options);
  if (SSL_connect(ssl.get()) == 1) {
    result.handshake_ok = true;
    FillSessionInfo(ssl.get(), &result);
    const std::string& extra = options.send_after_handshake;
    if (!extra.empty()) SSL_write(ssl.get(), extra.data(), static_cast<int>(extra.size()));
    SSL_shutdown(ssl.get());
  } else {
    long verify = SSL_get_verify_result(ssl.get());
    result.error = ossl::DrainErrors();
    if (verify != X509_V_OK)
      result.error += std::string(" (verify: ") + X509_verify_cert_error_string(verify) + ")";
    if (errno == EAGAIN) result.error += " (timed out)";
  }
  ossl::DrainErrors();
  ssl.reset();
  close(fd);
  return result;
}

}  // namespace hotfix::testsupport
