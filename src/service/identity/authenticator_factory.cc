#include "service/identity/authenticator_factory.h"

#include <utility>

namespace hotfix::service {

StatusOr<AuthenticatorSetup> MakeAuthenticator(const AuthenticatorFlags& flags, Logger* log) {
  if (flags.insecure_accept_any_token) {
    // Said at every start, loudly: a development setting must never pass unnoticed.
    log->Warn(
        "INSECURE: --insecure-accept-any-token is set: any non-empty authorization is accepted "
        "and no node identity is verified; never use this outside development");
    return AuthenticatorSetup{NewInsecureAnyTokenAuthenticator(), nullptr};
  }
  AttestedDocumentOptions options;
  options.signer_name = flags.signer_name;
  options.max_token_age = flags.max_token_age;
  options.cache_entries = flags.identity_cache_entries;
  options.anchors_are_issuers = !flags.issuers_path.empty();
  const std::string& path = options.anchors_are_issuers ? flags.issuers_path : flags.roots_path;
  auto roots = AttestationRoots::Load(path, std::move(options));
  if (!roots.ok()) return roots.status();
  log->Info("verifying attested documents",
            {{flags.issuers_path.empty() ? "attestation_roots" : "attestation_issuers", path},
             {"root_certificates", static_cast<int64_t>((*roots)->certificates())},
             {"signer_name", flags.signer_name},
             {"max_token_age_s", static_cast<int64_t>(flags.max_token_age.count())}});
  AttestationRoots* raw = roots->get();
  return AuthenticatorSetup{std::move(*roots), raw};
}

}  // namespace hotfix::service
