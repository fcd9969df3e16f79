// The service's TLS: an OpenSSL SSL_CTX made from the --tls-cert/--tls-key files, which
// selects ALPN "h2" from what the client offers (the node offers ["aks-live-patching","h2"])
// and refuses clients that do not offer it. The files are re-read when they change: new
// handshakes get the new pair, existing connections keep theirs, and a pair that does not
// load (half-written, mismatched) is ignored and the old one kept.
//
//   auto tls = TlsServerContext::Load(cert_path, key_path);   // refuses with a Status
//   SSL_CTX* ctx = (*tls)->Current(&generation);                // any thread
//   (*tls)->ReloadIfChanged(&log);                              // every --refresh-interval
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/file_util.h"
#include "common/log.h"
#include "common/status.h"

namespace hotfix::service {

class TlsServerContext {
 public:
  // The pair must be usable now: a missing or unreadable file, a file with no PEM certificate or
  // key, or a key not matching the certificate is refused with a Status naming the flag and file.
  static StatusOr<std::unique_ptr<TlsServerContext>> Load(std::string cert_path,
                                                          std::string key_path);

  // The context new handshakes use, shared with the caller; generation changes on reload.
  std::shared_ptr<SSL_CTX> Current(uint64_t* generation) const;
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // The leaf certificate's subject, one line, for the start-up log.
  std::string subject() const;
  // When the leaf certificate in use expires, Unix seconds (its notAfter):
  // lp_tls_certificate_expiry_timestamp_seconds.
  int64_t not_after() const { return not_after_.load(std::memory_order_relaxed); }

  // Re-reads the pair if either file's inode, size or modification time changed. Logs what
  // it did; a broken pair keeps the old context.
  void ReloadIfChanged(Logger* log);

 private:
  TlsServerContext(std::string cert_path, std::string key_path);
  Status Build();  // loads the files into a new context and installs it

  std::string cert_path_, key_path_;
  FileStamp cert_stamp_, key_stamp_;  // of the pair last tried
  mutable std::mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_;  // guarded by mu_
  std::string subject_;           // guarded by mu_
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> not_after_{0};
};

}  // namespace hotfix::service
