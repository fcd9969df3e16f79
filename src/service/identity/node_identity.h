// Node identity: who is calling, proven by the `authorization` metadata, which carries the
// `signature` of the VM's IMDS attested document (base64 of a PKCS#7 SignedData whose content
// is JSON: vmId, subscriptionId, sku, nonce, timeStamp.createdOn/expiresOn, ...).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/openssl.h"
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

// What Authenticator::Admit needs to remember an identity just verified.
struct IdentityCacheTicket {
  const void* issuer = nullptr;  // the authenticator that verified it; any other ignores it
  ossl::Sha256Digest token_sha256{};
  std::chrono::system_clock::time_point until;  // the document's acceptable life, at most
};

struct AuthResult {
  bool ok() const { return error.ok(); }
  NodeIdentity identity;  // valid when ok()
  IdentityFailure failure = IdentityFailure::kMissing;
  Status error;  // a message that says what was wrong, never echoing the token
  // Set when ok() by an authenticator with a cache that did not answer from it.
  std::optional<IdentityCacheTicket> remember;
};

// Counters since creation, exported as lp_identity_* and lp_signer_cache_* (docs/SERVICE.md,
// "Metrics"; all zero for authenticators without a cache).
struct AuthenticatorStats {
  uint64_t verifications = 0;  // full checks run (base64, PKCS#7, signature, content)
  // Answered from the cache without verifying: the identity, or kExpired for a cached
  // document whose expiresOn has passed.
  uint64_t cache_hits = 0;
  uint64_t cache_evictions = 0;  // entries dropped: expired ones, then the oldest when full
  uint64_t cache_entries = 0;    // entries held now
  // Verifications (counted in `verifications`) that found the document's certificate in the
  // signer cache (AttestedDocumentOptions::signer_cache_entries) and so skipped its parse and
  // its chain verification; the signature and every other check still ran.
  uint64_t signer_cache_hits = 0;
  uint64_t signer_cache_entries = 0;  // signer certificates held now
  // Verifications (counted in `verifications`) that found the document's certificate among
  // those whose chain failed (AttestedDocumentOptions::signer_refusal_slots) and so were
  // refused as before without its parse and without building its chain.
  uint64_t signer_refusal_cache_hits = 0;
  // Refusals the refusal cache (AttestedDocumentOptions::refusal_cache_slots) repeated unchecked.
  uint64_t refusal_cache_hits = 0;
};
// Adds `from`'s counters (not its gauges, the *_entries) to `to`'s: a reload's retired
// authenticator keeps counting in the metrics (attestation_roots.h).
void AddCounters(const AuthenticatorStats& from, AuthenticatorStats* to);

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // Safe to call from any number of threads at once.
  virtual AuthResult Authenticate(std::string_view token) = 0;
  // The caller let `identity` in (the subscription allow-list and the node's rate limit
  // passed): an authenticator with a cache keeps it under `ticket` (AuthResult::remember), so
  // the token's next call costs a hash. Identities turned away after authentication are never
  // kept: a caller holding valid documents of its own cannot fill the cache with identities
  // the service refuses, evicting the fleet's.
  virtual void Admit(const NodeIdentity& /*identity*/, const IdentityCacheTicket& /*ticket*/) {}
  virtual AuthenticatorStats stats() const { return {}; }
};

struct AttestedDocumentOptions {
  // PEM bundle the signer must chain to. It must hold a self-signed root; intermediates in it build
  // the chain (IMDS embeds only the signer certificate, so Azure's intermediate CA belongs here).
  std::string trust_roots_pem;
  // --attestation-issuers: every certificate of trust_roots_pem is a trust anchor as it is
  // (X509_V_FLAG_PARTIAL_CHAIN), so the signer must be issued by one of them; nothing above
  // them is consulted, and no self-signed root is needed.
  bool anchors_are_issuers = false;
  // Matched by X509_check_host, no wildcard certificates: the signer's DNS subjectAltNames,
  // or its CN only when it has none (RFC 6125; Azure's certificate carries both). A leading
  // dot (".metadata.azure.com") accepts any subdomain instead, for regional signers. The
  // signer must also carry the serverAuth extended key usage, as IMDS's does.
  std::string signer_name = "metadata.azure.com";
  size_t max_token_bytes = 64 * 1024;
  // A document created longer ago than this is refused (kExpired), however long it is valid:
  // a node fetches its document just before its call, so an old one is a replay. 0: no limit.
  std::chrono::seconds max_token_age{600};
  size_t cache_entries = 100000;  // verified documents kept, by SHA-256 of the token
  // Signer certificates kept, by SHA-256 of their DER, least recently used dropped first; 0
  // turns the signer cache off. A certificate is kept once a document embedding it (as its
  // only certificate) chained to the roots and passed the signer-name check; a later
  // document embedding exactly those bytes, inside the chain's validity, is then parsed
  // without it and its signature verified against the kept certificate, with the same
  // envelope, content and time checks and the same answer as the full check.
  size_t signer_cache_entries = 64;
  // Refused documents kept by SHA-256 of the token, for refusal_cache_ttl, in a table of
  // this many slots (refusal_cache.h): a repeated bad token costs a hash. 0 turns it off.
  size_t refusal_cache_slots = 4096;
  std::chrono::seconds refusal_cache_ttl{60};
  // Signer certificates whose chain to the roots failed, kept by SHA-256 of their DER for
  // refusal_cache_ttl in a table of this many slots, with the full check's refusal: a later
  // document embedding exactly those bytes, as its only certificate, in IMDS's layout and with the
  // same envelope, gets that refusal after a parse of its envelope and a hash, without the
  // certificate's parse and chain. Only chain failures are kept (never a bad signature, a wrong
  // name or a certificate not yet valid), and only certificates up to 8 KiB. 0 turns it off.
  size_t signer_refusal_slots = 256;
  // The time for timeStamp.createdOn/expiresOn and for cache expiry; empty: the system clock.
  // For tests. Certificate validity is still checked by OpenSSL against the real time.
  std::function<std::chrono::system_clock::time_point()> clock;
};

// Verifies with OpenSSL (signed_document.h: PKCS7_verify against the roots, X509_check_host
// on the signer; attested_content.h: the JSON content and its expiry) and caches verified documents
// by digest until they expire, so a fleet of retrying nodes costs a lookup, not an RSA
// verification; a new document from an already verified signer certificate costs its signature, not
// the certificate's parse and chain (signer_cache_entries). Thread-safe.
StatusOr<std::unique_ptr<Authenticator>> NewAttestedDocumentAuthenticator(
    AttestedDocumentOptions options);

// Development mode: any non-empty token is accepted as identity "insecure" (vm_id and
// subscription_id "insecure", insecure=true, expires_at the far future).
std::unique_ptr<Authenticator> NewInsecureAnyTokenAuthenticator();

}  // namespace hotfix::service
