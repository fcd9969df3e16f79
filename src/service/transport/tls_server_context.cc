#include "service/transport/tls_server_context.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <limits>
#include <vector>

#include "common/openssl.h"
#include "common/text.h"
#include "service/transport/server_certificates.h"

namespace hotfix::service {
namespace {

constexpr unsigned char kH2[] = {'h', '2'};
// The longest server name OpenSSL takes from a ClientHello (TLSEXT_MAXLEN_host_name).
constexpr size_t kMaxServerNameBytes = 255;

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

// What a connection's SSL carries for the server-name callback and for the event loop after
// a failed handshake (SSL ex_data: freed with the SSL).
struct HandshakeNote {
  std::optional<std::string> arrived_on;  // address bytes: the PROXY header's destination
  std::optional<std::string> refused;     // why no pair was served
};

void FreeNote(void*, void* note, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<HandshakeNote*>(note);
}

int NoteIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, FreeNote);
  return index;
}

HandshakeNote* NoteOf(SSL* ssl) {
  auto* note = static_cast<HandshakeNote*>(SSL_get_ex_data(ssl, NoteIndex()));
  if (note == nullptr) {
    note = new HandshakeNote();
    if (SSL_set_ex_data(ssl, NoteIndex(), note) != 1) {
      delete note;
      return nullptr;
    }
  }
  return note;
}

// The folder's index belongs to the SSL_CTX made for it: connections hold their context (and
// so the index) for as long as their handshake may still ask it, whatever reloads meanwhile.
void FreeIndex(void*, void* index, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<const CertificateIndex*>(index);
}

int IndexIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, FreeIndex);
  return index;
}

// The address bytes of a socket address (4 for IPv4, 16 for IPv6), "" for another family.
std::string AddressBytes(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    return std::string(reinterpret_cast<const char*>(&in.sin_addr), sizeof in.sin_addr);
  }
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    return std::string(reinterpret_cast<const char*>(&in6.sin6_addr), sizeof in6.sin6_addr);
  }
  return {};
}

std::string AddressText(const std::string& bytes) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(bytes.size() == 4 ? AF_INET : AF_INET6, bytes.data(), text, sizeof text);
  return text;
}

// The address a client without a server name dialed: its PROXY header's destination, else the
// socket's own local address (a node that reached the service directly).
std::string ArrivalAddress(SSL* ssl, HandshakeNote* note) {
  if (note != nullptr && note->arrived_on) return *note->arrived_on;
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  const int fd = SSL_get_fd(ssl);
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return {};
  return AddressBytes(local);
}

// The server-name callback of a folder's context (OpenSSL calls it for every ClientHello,
// with or without SNI, before it picks a certificate, a cipher or ALPN): the pair for the name
// goes on the connection, or the handshake ends with the unrecognized_name alert (RFC 6066 3).
// Never another pair: it would show a node another cluster's name and let it talk to an
// endpoint of the wrong cluster.
int SelectPair(SSL* ssl, int* alert, void* arg) {
  const auto* index = static_cast<const CertificateIndex*>(arg);
  const char* server_name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  HandshakeNote* note = static_cast<HandshakeNote*>(SSL_get_ex_data(ssl, NoteIndex()));
  const ServingPair* pair = nullptr;
  std::string refused;
  if (server_name != nullptr && server_name[0] != '\0') {
    pair = index->ForServerName(server_name);
    if (pair == nullptr) {
      refused = "server name \"" + EscapeForMessage(server_name, kMaxServerNameBytes) +
                "\" matches no certificate";
    }
  } else {
    const std::string address = ArrivalAddress(ssl, note);
    if (!address.empty()) pair = index->ForAddress(address);
    if (pair == nullptr) {
      refused = "no server name (SNI), and no certificate is for the address " +
                (address.empty() ? std::string("?") : AddressText(address)) + " it dialed";
    }
  }
  if (pair == nullptr) {
    if ((note = NoteOf(ssl)) != nullptr) note->refused = std::move(refused);
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  // The connection takes its own references: it no longer needs the pair once this returns.
  if (SSL_use_cert_and_key(ssl, pair->leaf.get(), pair->key.get(), pair->chain.get(), 1) != 1) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  return SSL_TLSEXT_ERR_OK;
}

// A context with everything but its certificates.
StatusOr<std::shared_ptr<SSL_CTX>> NewServerContext() {
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
  // TLS 1.2: forward-secret key exchange and AEAD only, as the node's own dialer offers
  // (wire/tls_dialer.cc). OpenSSL's DEFAULT would also take CBC suites (Lucky13-style padding
  // oracles) and RSA key exchange (no forward secrecy); every gRPC client offers these.
  if (SSL_CTX_set_cipher_list(c, kTls12CipherList) != 1) {
    return Status::Internal("setting the TLS 1.2 cipher list: " + OpenSslErrors());
  }
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  // Idle connections give their 16 KiB+ record buffers back (docs/SERVICE.md, "Limits").
  // The chain sent is the pair's file as it is: without NO_AUTO_CHAIN, OpenSSL would try to
  // build one from the context's (empty) store on every handshake of a pair without
  // intermediates (ssl_add_cert_chain: an X509_verify_cert per connection, for nothing).
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                          SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_NO_AUTO_CHAIN);
  // Read whole socket buffers, not a record header and then its body: a node's call arrives as
  // several records at once, and each would otherwise cost two read(2) calls.
  SSL_CTX_set_read_ahead(c, 1);
  SSL_CTX_set_alpn_select_cb(c, SelectH2, nullptr);
  return ctx;
}

int64_t NotAfterOf(X509* leaf) {
  struct tm expiry {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &expiry) != 1) {
    ERR_clear_error();
    return 0;
  }
  return static_cast<int64_t>(timegm(&expiry));
}

void LogRefusals(const std::vector<PairRefusal>& refused, Logger* log) {
  for (const PairRefusal& r : refused) {
    log->Warn(
        r.kept_previous
            ? "TLS certificate pair changed but does not load; still serving its previous pair"
            : "TLS certificate pair refused; it is not served",
        {{"pair", r.name}, {"error", r.error}});
  }
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

StatusOr<std::unique_ptr<TlsServerContext>> TlsServerContext::LoadFolder(std::string dir,
                                                                         Logger* log) {
  if (dir.empty()) return Status::InvalidArgument("--tls-cert-dir is required");
  std::unique_ptr<TlsServerContext> tls(new TlsServerContext({}, {}));
  tls->folder_ = std::make_unique<CertificateFolder>(std::move(dir));
  CertificateFolderScan scan = tls->folder_->Scan(static_cast<int64_t>(time(nullptr)));
  if (!scan.error.ok()) return scan.error;
  LogRefusals(scan.refused, log);
  tls->rejected_.store(tls->folder_->Refused().size(), std::memory_order_relaxed);
  if (tls->folder_->Pairs().empty()) {
    std::string why = "no pair in it loads (each is a folder holding tls.crt and tls.key)";
    if (!scan.refused.empty())
      why += "; " + scan.refused.front().name + ": " + scan.refused.front().error;
    return Status::InvalidArgument("--tls-cert-dir " + tls->folder_->dir() + ": " + why);
  }
  if (Status st = tls->BuildFromFolder(); !st.ok()) return st;
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

  StatusOr<std::shared_ptr<SSL_CTX>> ctx = NewServerContext();
  if (!ctx.ok()) return ctx.status();
  SSL_CTX* c = ctx->get();
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
  Install(std::move(*ctx), name, NotAfterOf(chain.front().get()), {});
  return Status::Ok();
}

Status TlsServerContext::BuildFromFolder() {
  StatusOr<std::shared_ptr<SSL_CTX>> ctx = NewServerContext();
  if (!ctx.ok()) return ctx.status();
  std::vector<std::shared_ptr<const ServingPair>> pairs = folder_->Pairs();
  int64_t first_expiry = pairs.empty() ? 0 : std::numeric_limits<int64_t>::max();
  std::vector<std::pair<std::string, int64_t>> expiries;
  for (const auto& pair : pairs) {
    first_expiry = std::min(first_expiry, pair->not_after);
    expiries.emplace_back(pair->name, pair->not_after);
  }
  const size_t count = pairs.size();
  auto index = std::make_unique<CertificateIndex>(std::move(pairs));
  if (SSL_CTX_set_ex_data(ctx->get(), IndexIndex(), index.get()) != 1) {
    return Status::Internal("SSL_CTX_set_ex_data: " + ossl::DrainErrorsOr("failed"));
  }
  SSL_CTX_set_tlsext_servername_callback(ctx->get(), SelectPair);
  SSL_CTX_set_tlsext_servername_arg(ctx->get(), index.release());  // the context's (FreeIndex)
  Install(std::move(*ctx),
          "--tls-cert-dir " + folder_->dir() + ": " + std::to_string(count) +
              (count == 1 ? " pair" : " pairs"),
          first_expiry, std::move(expiries));
  return Status::Ok();
}

void TlsServerContext::Install(std::shared_ptr<SSL_CTX> ctx, std::string subject, int64_t not_after,
                               std::vector<std::pair<std::string, int64_t>> expiries) {
  const size_t count = folder_ ? expiries.size() : 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ctx_ = std::move(ctx);
    subject_ = std::move(subject);
    expiries_ = std::move(expiries);
  }
  not_after_.store(not_after, std::memory_order_relaxed);
  certificates_.store(count, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
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

std::vector<std::pair<std::string, int64_t>> TlsServerContext::PairExpiries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expiries_;
}

void TlsServerContext::ReloadIfChanged(Logger* log) {
  if (folder_) {
    CertificateFolderScan scan = folder_->Scan(static_cast<int64_t>(time(nullptr)));
    if (!scan.error.ok()) {
      folder_unreadable_.store(true, std::memory_order_relaxed);
      if (scan.error.message() != folder_error_) {
        log->Error("TLS certificate folder cannot be read; still serving the previous pairs",
                   {{"error", scan.error}});
        folder_error_ = scan.error.message();
      }
      return;
    }
    folder_unreadable_.store(false, std::memory_order_relaxed);
    folder_error_.clear();
    LogRefusals(scan.refused, log);
    rejected_.store(folder_->Refused().size(), std::memory_order_relaxed);
    if (!scan.changed) return;
    if (Status st = BuildFromFolder(); !st.ok()) {
      log->Error("TLS certificates changed but cannot be installed; still serving the previous",
                 {{"error", st}});
      return;
    }
    log->Info("TLS certificates reloaded",
              {{"tls_subject", subject()},
               {"added", static_cast<int64_t>(scan.added.size())},
               {"replaced", static_cast<int64_t>(scan.replaced.size())},
               {"removed", static_cast<int64_t>(scan.removed.size())},
               {"refused", static_cast<int64_t>(rejected_certificates())}});
    if (certificates() == 0) {
      log->Warn("no TLS certificate pair left in --tls-cert-dir: every handshake is refused",
                {{"dir", folder_->dir()}});
    }
    return;
  }
  if (StampOf(cert_path_) == cert_stamp_ && StampOf(key_path_) == key_stamp_) return;
  if (Status st = Build(); !st.ok()) {
    rejected_.store(1, std::memory_order_relaxed);
    log->Warn("TLS certificate files changed but do not load; still serving the previous pair",
              {{"error", st}});
    return;
  }
  rejected_.store(0, std::memory_order_relaxed);
  log->Info("TLS certificate reloaded", {{"tls_subject", subject()}});
}

void TlsServerContext::SetArrivalAddress(SSL* ssl, const sockaddr_storage& address) {
  std::string bytes = AddressBytes(address);
  if (bytes.empty()) return;
  if (HandshakeNote* note = NoteOf(ssl)) note->arrived_on = std::move(bytes);
}

std::optional<std::string> TlsServerContext::RefusedServerName(const SSL* ssl) {
  const auto* note = static_cast<const HandshakeNote*>(SSL_get_ex_data(ssl, NoteIndex()));
  if (note == nullptr) return std::nullopt;
  return note->refused;
}

}  // namespace hotfix::service
