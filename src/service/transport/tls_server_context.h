// The service's TLS: an OpenSSL SSL_CTX which selects ALPN "h2" from what the client offers
// (the node offers ["aks-live-patching","h2"]) and refuses clients that do not offer it, with
// its certificates in one of two shapes (docs/SERVICE.md, "TLS"):
//
//  - one pair, --tls-cert/--tls-key (one cluster per service: the cluster's apiserver FQDN,
//    issued by its CA), served to every client whatever name it sent;
//  - a folder of pairs, --tls-cert-dir (one service for many clusters; certificate_folder.h):
//    each ClientHello gets the pair for the server name it sent (server_certificates.h), or,
//    without one, for the address it dialed; a ClientHello no pair is for is refused in the
//    handshake with the unrecognized_name alert, never given another cluster's certificate.
//
// The files are re-read when they change: new handshakes get the new pairs, existing
// connections keep theirs, and a pair that does not load (half-written, mismatched) is
// ignored and the old one kept. Each reload makes a new SSL_CTX with what it loaded (the
// folder's index included, read-only from then on): the event loops pick it up by its
// generation, so a handshake takes no lock and shares nothing that changes.
//
//   auto tls = TlsServerContext::Load(cert_path, key_path);   // refuses with a Status
//   auto tls = TlsServerContext::LoadFolder(dir, &log);        // or: the folder
//   SSL_CTX* ctx = (*tls)->Current(&generation);                // any thread
//   (*tls)->ReloadIfChanged(&log);                              // every --refresh-interval
#pragma once

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/log.h"
#include "common/status.h"
#include "service/transport/certificate_folder.h"

namespace hotfix::service {

// The TLS 1.2 suites served, in the server's order (TLS 1.3's three are OpenSSL's own): ECDHE
// key exchange and an AEAD cipher, nothing else (docs/SERVICE.md, "TLS").
inline constexpr char kTls12CipherList[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384";

class TlsServerContext {
 public:
  // The pair must be usable now: a missing or unreadable file, a file with no PEM certificate or
  // key, or a key not matching the certificate is refused with a Status naming the flag and file.
  static StatusOr<std::unique_ptr<TlsServerContext>> Load(std::string cert_path,
                                                          std::string key_path);
  // The folder must be readable and hold at least one usable pair; the pairs it refuses are
  // logged (WARN) and left out.
  static StatusOr<std::unique_ptr<TlsServerContext>> LoadFolder(std::string dir, Logger* log);

  // The context new handshakes use, shared with the caller; generation changes on reload.
  std::shared_ptr<SSL_CTX> Current(uint64_t* generation) const;
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // True with --tls-cert-dir: each handshake's certificate is chosen by its server name.
  bool selects_by_server_name() const { return folder_ != nullptr; }
  // The leaf certificate's subject, one line (with a folder: how many pairs, from where), for
  // the start-up log.
  std::string subject() const;
  // When the leaf certificate in use expires (with a folder: the first of them to), Unix
  // seconds (its notAfter): lp_tls_certificate_expiry_timestamp_seconds.
  int64_t not_after() const { return not_after_.load(std::memory_order_relaxed); }
  // Pairs served now (1 with --tls-cert): lp_tls_certificates.
  size_t certificates() const { return certificates_.load(std::memory_order_relaxed); }
  // Pairs refused as their files are now, kept out or still serving their previous version
  // (with --tls-cert: 1 while a changed pair does not load): lp_tls_rejected_certificates.
  size_t rejected_certificates() const { return rejected_.load(std::memory_order_relaxed); }
  // False while a pair is refused or the folder cannot be read: lp_tls_last_reload_successful.
  bool last_reload_successful() const {
    return rejected_certificates() == 0 && !folder_unreadable_.load(std::memory_order_relaxed);
  }
  // With a folder: each pair served and its leaf's notAfter, by name.
  std::vector<std::pair<std::string, int64_t>> PairExpiries() const;

  // Re-reads the pair if either file's inode, size or modification time changed (with a
  // folder: each pair's). Logs what it did; a broken pair keeps the old one.
  void ReloadIfChanged(Logger* log);

  // Where a connection arrived when that is not its socket's local address: the destination
  // in its PROXY header, the address the node dialed (the kube-api-proxy's). A ClientHello
  // without a server name is then served the pair for that address. Call before the handshake.
  static void SetArrivalAddress(SSL* ssl, const sockaddr_storage& address);
  // After a failed handshake: why its server name (or, without one, the address it dialed)
  // was refused, when that is why it failed; nullopt otherwise.
  static std::optional<std::string> RefusedServerName(const SSL* ssl);

 private:
  TlsServerContext(std::string cert_path, std::string key_path);
  Status Build();  // loads the files into a new context and installs it
  // A new context for the folder's pairs now, installed.
  Status BuildFromFolder();
  void Install(std::shared_ptr<SSL_CTX> ctx, std::string subject, int64_t not_after,
               std::vector<std::pair<std::string, int64_t>> expiries);

  std::string cert_path_, key_path_;
  FileStamp cert_stamp_, key_stamp_;           // of the pair last tried
  std::unique_ptr<CertificateFolder> folder_;  // with --tls-cert-dir; only ReloadIfChanged's
  std::string folder_error_;                   // the last listing error logged
  mutable std::mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_;                           // guarded by mu_
  std::string subject_;                                    // guarded by mu_
  std::vector<std::pair<std::string, int64_t>> expiries_;  // guarded by mu_
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> not_after_{0};
  std::atomic<size_t> certificates_{0};
  std::atomic<size_t> rejected_{0};
  std::atomic<bool> folder_unreadable_{false};
};

}  // namespace hotfix::service
