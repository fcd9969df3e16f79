// The authenticator the service's flags ask for (docs/SERVICE.md, "Identity"): attested
// documents verified against --attestation-roots or --attestation-issuers, or, in development
// only and said loudly at every start, any token.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "service/identity/attestation_roots.h"
#include "service/identity/node_identity.h"

namespace hotfix::service {

struct AuthenticatorFlags {
  bool insecure_accept_any_token = false;  // --insecure-accept-any-token
  std::string roots_path;                  // --attestation-roots
  std::string issuers_path;                // --attestation-issuers, instead of roots_path
  std::string signer_name = "metadata.azure.com";
  std::chrono::seconds max_token_age{600};
  // Verified documents kept (AttestedDocumentOptions::cache_entries): sized from the memory
  // limit (memory_budget.h, SizeTables).
  size_t identity_cache_entries = 100000;
};

// The authenticator and, for attested documents, its roots (reloaded on change, read by metrics).
struct AuthenticatorSetup {
  std::unique_ptr<Authenticator> authenticator;
  AttestationRoots* roots = nullptr;  // the authenticator, or null in development mode
};

// Loads the roots (a Status naming the file when they do not load) and logs what verifies.
StatusOr<AuthenticatorSetup> MakeAuthenticator(const AuthenticatorFlags& flags, Logger* log);

}  // namespace hotfix::service
