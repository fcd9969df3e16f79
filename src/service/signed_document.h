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
#include "service/node_identity.h"
#include "service/signer_cache.h"

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

// The PEM bundle the signer must chain to, as a store: at least one certificate; purpose
// "any" (IMDS's signer is a TLS-style certificate, not an S/MIME one; its serverAuth EKU is
// checked on the signer itself). anchors_are_issuers: every certificate is an anchor as it is
// (X509_V_FLAG_PARTIAL_CHAIN), --attestation-issuers.
StatusOr<ossl::StorePtr> LoadTrustRoots(std::string_view pem, bool anchors_are_issuers = false);

// The layer with its roots parsed once, and signer certificates kept (signer_cache.h) so that
// a later document from a kept certificate costs its signature, not the certificate's parse
// and chain. Thread-safe.
class SignedDocumentVerifier {
 public:
  // signer_name empty: no name check (the test IMDS stand-in's verifier only).
  static StatusOr<std::unique_ptr<SignedDocumentVerifier>> Create(std::string_view roots_pem,
                                                                  bool anchors_are_issuers,
                                                                  std::string signer_name,
                                                                  size_t signer_cache_entries);
  SignedDocument Verify(std::string_view der);

  uint64_t signer_cache_hits() const { return signer_cache_hits_.load(std::memory_order_relaxed); }
  size_t signer_cache_entries() const { return signers_.size(); }

 private:
  SignedDocumentVerifier(ossl::StorePtr roots, std::string signer_name, ossl::MdPtr sha256,
                         size_t signer_cache_entries);
  std::optional<CertDigest> Sha256(std::string_view bytes) const;
  std::optional<SignedDocument> VerifyWithCachedSigner(std::string_view der);
  void RememberSigner(PKCS7* p7, const SignedDocument& signed_doc);

  ossl::StorePtr roots_;  // X509_STORE is safe for concurrent verifications once built
  std::string signer_name_;
  ossl::MdPtr sha256_;  // fetched once: an implicit fetch per digest costs a provider lookup
  SignerCache signers_;
  std::atomic<uint64_t> signer_cache_hits_{0};
};

// The whole layer for one token, roots parsed each time, no signer cache: what the test IMDS
// stand-in's verifier calls.
SignedDocument VerifySignedDocument(std::string_view token, std::string_view trust_roots_pem,
                                    std::string_view signer_name);

}  // namespace hotfix::service
