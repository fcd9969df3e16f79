// Node identity: who is calling, proven by the `authorization` metadata, which carries the
// `signature` of the VM's IMDS attested document (base64 of a PKCS#7 SignedData whose content
// is JSON: vmId, subscriptionId, sku, nonce, timeStamp.createdOn/expiresOn, ...).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hotfix::service {

struct NodeIdentity {
  std::string vm_id;
  std::string subscription_id;
  std::string sku;
  std::chrono::system_clock::time_point expires_at;
  bool insecure = false;  // accepted by the development mode, not verified
};

// Why a token was refused; each is a label value of the identity-failure metric.
enum class IdentityFailure {
  kMissing,          // no or empty authorization metadata
  kMalformed,        // not base64, not DER PKCS#7 SignedData, or too large
  kUntrustedSigner,  // signature or chain does not verify against the trust roots
  kWrongSigner,      // signer certificate not issued for the configured name
  kBadContent,       // content is not the expected JSON, or lacks vmId/subscriptionId/times
  kExpired,          // timeStamp.expiresOn has passed (or createdOn is in the future)
};
const char* IdentityFailureName(IdentityFailure failure);  // "missing", "malformed", ...

struct AuthResult {
  bool ok() const { return error.ok(); }
  NodeIdentity identity;  // valid when ok()
  IdentityFailure failure = IdentityFailure::kMissing;
  Status error;  // a message that says what was wrong, never echoing the token
};

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  virtual AuthResult Authenticate(std::string_view token) = 0;
};

struct AttestedDocumentOptions {
  std::string trust_roots_pem;  // PEM bundle the signer must chain to
  std::string signer_name = "metadata.azure.com";
  size_t max_token_bytes = 64 * 1024;
  size_t cache_entries = 100000;  // verified documents kept, by SHA-256 of the token
};

// Verifies with OpenSSL (PKCS7_verify against the roots, X509_check_host on the signer, the
// JSON content and its expiry) and caches verified documents by digest until they expire, so a
// fleet of retrying nodes costs a lookup, not an RSA verification. Thread-safe.
StatusOr<std::unique_ptr<Authenticator>> NewAttestedDocumentAuthenticator(
    AttestedDocumentOptions options);

// Development mode: any non-empty token is accepted as identity "insecure".
std::unique_ptr<Authenticator> NewInsecureAnyTokenAuthenticator();

}  // namespace hotfix::service
