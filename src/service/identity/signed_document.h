// The signature layer of a node's identity: the `authorization` token (strict base64 of a DER
// PKCS#7 SignedData, as IMDS returns it) -> its one canonical envelope -> PKCS7_verify against
// the trust roots -> the signer's name (X509_check_host) and serverAuth EKU. Nothing here reads the
// content; attested_content.h does, after this layer accepted it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/openssl.h"
#include "common/status.h"
#include "service/identity/node_identity.h"
#include "service/identity/refusal_cache.h"
#include "service/identity/signer_cache.h"

namespace hotfix::service {

struct SignedDocument {
  bool ok() const { return error.ok(); }
  std::string content;         // the signed bytes (IMDS: the JSON document)
  std::string signer_subject;  // one line, e.g. "/CN=metadata.azure.com"
  std::chrono::system_clock::time_point signer_not_after;
  IdentityFailure failure = IdentityFailure::kMalformed;  // when !ok(): kMalformed,
                                                          // kUntrustedSigner or kWrongSigner
  Status error;
};

// The token's DER: strict base64 on one line.
StatusOr<std::string> DecodeToken(std::string_view token);

// The layer with its roots parsed once, signer certificates kept (signer_cache.h) so that a later
// document from a kept certificate costs its signature, not the certificate's parse and chain, and
// certificates whose chain failed kept for a while (refusal_cache.h) so that a later document
// embedding one costs a parse of its envelope, not the certificate's parse and chain. Thread-safe.
class SignedDocumentVerifier {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  // From options: trust_roots_pem, anchors_are_issuers, signer_name, signer_cache_entries,
  // signer_refusal_slots, refusal_cache_ttl. signer_name empty: no name check.
  static StatusOr<std::unique_ptr<SignedDocumentVerifier>> Create(
      const AttestedDocumentOptions& options);
  // `now` dates the kept refusals; certificates are checked against the real time.
  SignedDocument Verify(std::string_view der, TimePoint now);

  uint64_t signer_cache_hits() const { return signer_cache_hits_.load(std::memory_order_relaxed); }
  size_t signer_cache_entries() const { return signers_.size(); }
  uint64_t signer_refusal_cache_hits() const {
    return signer_refusal_hits_.load(std::memory_order_relaxed);
  }

 private:
  // IMDS's signer certificate is under 2 KiB; each refused one kept costs about three times
  // its size (its DER twice, as kept and in the parsed certificate, and the parsed fields), so
  // 256 slots hold at most about 6 MiB.
  static constexpr size_t kMaxRefusedSignerBytes = 8 * 1024;
  // A signer certificate whose chain failed, and the full check's refusal of its document.
  struct RefusedSigner {
    ossl::X509Ptr cert;  // parsed once, for the envelope checks of later documents
    std::string der;     // exactly as embedded
    IdentityFailure failure = IdentityFailure::kUntrustedSigner;
    Status error;
  };
  using RefusedSigners = RefusalCache<std::shared_ptr<const RefusedSigner>>;

  SignedDocumentVerifier(ossl::StorePtr roots, const AttestedDocumentOptions& options,
                         ossl::MdPtr sha256);
  std::optional<SignedDocument> AnswerFromKeptCertificate(std::string_view der, TimePoint now);
  std::optional<SignedDocument> VerifyWithCachedSigner(const SplitSignedData& split,
                                                       const ossl::Sha256Digest& digest,
                                                       std::shared_ptr<const CachedSigner> signer);
  std::optional<SignedDocument> RefuseAsBefore(const SplitSignedData& split,
                                               const RefusedSigner& refused);
  void RememberSigner(PKCS7* p7, const SignedDocument& signed_doc);
  void RememberRefusedSigner(PKCS7* p7, const SignedDocument& signed_doc, TimePoint now);

  ossl::StorePtr roots_;  // X509_STORE is safe for concurrent verifications once built
  std::string signer_name_;
  ossl::MdPtr sha256_;  // fetched once: an implicit fetch per digest costs a provider lookup
  SignerCache signers_;
  std::unique_ptr<RefusedSigners> refused_signers_;  // null when signer_refusal_slots is 0
  std::atomic<uint64_t> signer_cache_hits_{0};
  std::atomic<uint64_t> signer_refusal_hits_{0};
};

// The whole layer for one token, roots parsed each time, no signer cache: what the test IMDS
// stand-in's verifier calls.
SignedDocument VerifySignedDocument(std::string_view token, std::string_view trust_roots_pem,
                                    std::string_view signer_name);

}  // namespace hotfix::service
