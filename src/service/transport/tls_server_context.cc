#include "service/transport/tls_server_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstring>
#include <vector>

#include "common/openssl.h"

namespace hotfix::service {
namespace {

constexpr unsigned char kH2[] = {'h', '2'};

using ossl::X509Ptr;

std::string OpenSslErrors() { return ossl::DrainErrorsOr("no PEM data"); }

// Picks "h2" wherever the client lists it; a client that does not offer it is refused with
// the no_application_protocol alert rather than spoken to in a protocol it did not ask for.
int SelectH2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
             unsigned int inlen, void*) {
  for (unsigned int i = 0; i < inlen;) {
    unsigned int len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == sizeof kH2 && std::memcmp(in + i + 1, kH2, sizeof kH2) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

}  // namespace

TlsServerContext::TlsServerContext(std::string cert_path, std::string key_path)
    : cert_path_(std::move(cert_path)), key_path_(std::move(key_path)) {}

StatusOr<std::unique_ptr<TlsServerContext>> TlsServerContext::Load(std::string cert_path,
                                                                   std::string key_path) {
  std::unique_ptr<TlsServerContext> tls(
      new TlsServerContext(std::move(cert_path), std::move(key_path)));
  if (Status st = tls->Build(); !st.ok()) return st;
  return tls;
}

Status TlsServerContext::Build() {
  cert_stamp_ = StampOf(cert_path_);
  key_stamp_ = StampOf(key_path_);

  StatusOr<std::string> cert_pem = ReadFlagFile("--tls-cert", cert_path_);
  if (!cert_pem.ok()) return cert_pem.status();
  StatusOr<std::string> key_pem = ReadFlagFile("--tls-key", key_path_);
  if (!key_pem.ok()) return key_pem.status();

  StatusOr<std::vector<X509Ptr>> parsed = ossl::ParsePemCertificates(*cert_pem);
  if (!parsed.ok()) return parsed.status().Annotate("--tls-cert " + cert_path_);
  std::vector<X509Ptr>& chain = *parsed;
  ossl::BioPtr key_bio(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
  ossl::PkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return Status::InvalidArgument("--tls-key " + key_path_ +
                                   ": no usable PEM private key: " + OpenSslErrors());
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("--tls-key " + key_path_ +
                                   " does not match the certificate in --tls-cert " + cert_path_);
  }

  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return Status::Internal("SSL_CTX_new: " + OpenSslErrors());
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  // Renegotiation is a CPU lever for the peer and nothing a node needs; a node connects once per
  // boot, so session tickets and the session cache would cost every handshake for no resumption.
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET |
                             SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_num_tickets(c, 0);
  // The same three TLS 1.3 suites as OpenSSL's default, AES-128-GCM first as Go's and
  // BoringSSL's servers order them: the smaller key schedule (SHA-256) and cipher cost every
  // handshake less, and AES-128-GCM is the suite every TLS 1.3 peer must implement.
  SSL_CTX_set_ciphersuites(
      c, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384");
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  // Idle connections give their 16 KiB+ record buffers back (docs/SERVICE.md, "Limits").
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                          SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Read whole socket buffers, not a record header and then its body: a node's call arrives as
  // several records at once, and each would otherwise cost two read(2) calls.
  SSL_CTX_set_read_ahead(c, 1);
  SSL_CTX_set_alpn_select_cb(c, SelectH2, nullptr);
  if (SSL_CTX_use_certificate(c, chain.front().get()) != 1 ||
      SSL_CTX_use_PrivateKey(c, key.get()) != 1) {
    return Status::InvalidArgument("--tls-cert " + cert_path_ + ": " + OpenSslErrors());
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    // add1: the context takes its own reference.
    if (SSL_CTX_add1_chain_cert(c, chain[i].get()) != 1) {
      return Status::InvalidArgument("--tls-cert " + cert_path_ + ": " + OpenSslErrors());
    }
  }
  char name[512];
  X509_NAME_oneline(X509_get_subject_name(chain.front().get()), name, sizeof name);
  struct tm expiry {};
  const bool dated = ASN1_TIME_to_tm(X509_get0_notAfter(chain.front().get()), &expiry) == 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ctx_ = std::move(ctx);
    subject_ = name;
  }
  not_after_.store(dated ? static_cast<int64_t>(timegm(&expiry)) : 0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

std::shared_ptr<SSL_CTX> TlsServerContext::Current(uint64_t* generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  *generation = generation_.load(std::memory_order_acquire);
  return ctx_;
}

std::string TlsServerContext::subject() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subject_;
}

void TlsServerContext::ReloadIfChanged(Logger* log) {
  if (StampOf(cert_path_) == cert_stamp_ && StampOf(key_path_) == key_stamp_) return;
  if (Status st = Build(); !st.ok()) {
    log->Warn("TLS certificate files changed but do not load; still serving the previous pair",
              {{"error", st}});
    return;
  }
  log->Info("TLS certificate reloaded", {{"tls_subject", subject()}});
}

}  // namespace hotfix::service
