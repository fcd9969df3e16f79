// The attested-document authenticator made from the --attestation-roots file, and made again
// when the file changes (a ConfigMap edit, a rotated CA), as the TLS pair is
// (tls_server_context.h): calls after a reload are checked against the new roots, and with a
// fresh identity cache, so nothing verified under the old roots is trusted under the new
// ones. A file that does not load (no PEM certificate, half-written, unreadable) is logged,
// counted in last_reload_successful() and ignored: the old roots keep serving.
//
//   auto roots = AttestationRoots::Load(path, options);   // refuses with a Status
//   AuthResult r = (*roots)->Authenticate(token);         // any thread
//   (*roots)->ReloadIfChanged(&log);                      // every --refresh-interval
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/file_util.h"
#include "common/log.h"
#include "common/status.h"
#include "service/identity/node_identity.h"

namespace hotfix::service {

class AttestationRoots final : public Authenticator {
 public:
  // `options` without trust_roots_pem: the file gives those. InvalidArgument naming
  // --attestation-roots and the file when it does not load now.
  static StatusOr<std::unique_ptr<AttestationRoots>> Load(std::string path,
                                                          AttestedDocumentOptions options);

  AuthResult Authenticate(std::string_view token) override;
  // To the authenticator in use now, which ignores a ticket the roots before a reload issued:
  // the new roots start with an empty cache.
  void Admit(const NodeIdentity& identity, const IdentityCacheTicket& ticket) override;
  // Counters across reloads (an identity cache dropped at a reload keeps what it counted);
  // the cache sizes are the current one's.
  AuthenticatorStats stats() const override;

  // Re-reads the file if its inode, size or modification time changed; logs what it did.
  void ReloadIfChanged(Logger* log);

  // When the first root or intermediate in use expires, Unix seconds (0: none dated).
  int64_t not_after() const { return not_after_.load(std::memory_order_relaxed); }
  size_t certificates() const { return certificates_.load(std::memory_order_relaxed); }
  // False after a changed file failed to load, until one loads.
  bool last_reload_successful() const { return reload_ok_.load(std::memory_order_relaxed); }

 private:
  AttestationRoots(std::string path, AttestedDocumentOptions options);
  Status Build();  // reads the file and installs a new authenticator
  std::shared_ptr<Authenticator> current() const;

  const std::string path_;
  const AttestedDocumentOptions options_;
  FileStamp stamp_;  // of the file last tried; only ReloadIfChanged's thread
  mutable std::mutex mu_;
  std::shared_ptr<Authenticator> current_;  // guarded by mu_
  AuthenticatorStats retired_;              // guarded by mu_: counters of replaced ones
  std::atomic<int64_t> not_after_{0};
  std::atomic<size_t> certificates_{0};
  std::atomic<bool> reload_ok_{true};
};

}  // namespace hotfix::service
