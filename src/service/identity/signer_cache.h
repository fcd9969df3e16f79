// The signature layer's cache of signer certificates (signed_document.cc, SignedDocumentVerifier).
//
// IMDS signs every document of a region with the same certificate and embeds it in each document.
// Parsing that certificate is most of d2i_PKCS7's cost (OpenSSL 3's decoder setup for its public
// key) and verifying its chain most of PKCS7_verify's, so both are done once per distinct
// certificate: a certificate that chained to the trust roots and passed the signer-name check is
// kept here, and a later document that embeds exactly those bytes is parsed without them and its
// signature verified against the kept certificate. See docs/SERVICE.md "Identity".
#pragma once

#include <openssl/asn1.h>
#include <openssl/x509.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "common/openssl.h"
#include "common/status.h"

namespace hotfix::service {

// ---- Splitting a document around its certificate ----------------------------------------

// A DER ContentInfo holding SignedData, taken apart around its one embedded certificate.
struct SplitSignedData {
  std::string_view certificate;  // the certificate's DER as embedded: a view into the input
  std::string stripped;          // the same ContentInfo without the certificates element
};

// Walks `der` with ASN1_get_object: ContentInfo SEQUENCE { contentType OID, [0] { SignedData
// SEQUENCE { version INTEGER, digestAlgorithms SET, contentInfo SEQUENCE, certificates [0]
// holding one certificate SEQUENCE, signerInfos SET } } }, nothing after it. nullopt for
// anything else (no certificates or several, crls, an indefinite length, trailing bytes, any
// other element), and unless inserting the certificate back into `stripped` gives `der` byte
// for byte: the enclosing headers were then in DER's one form, so `der` is DER exactly when
// `stripped` is. Only the layout is checked; d2i_PKCS7 of `stripped` checks the rest.
std::optional<SplitSignedData> SplitOffCertificate(std::string_view der);

// ---- The cache --------------------------------------------------------------------------

using Asn1TimePtr = std::unique_ptr<ASN1_TIME, ossl::Deleter<ASN1_TIME_free>>;

// A signer certificate that passed the full check: PKCS7_verify's chain verification against the
// trust roots (with the document's own certificate as the only untrusted one) and X509_check_host
// against the signer name. Immutable once built; shared read-only by the verifying threads.
struct CachedSigner {
  ossl::X509Ptr cert;   // parsed once: its public key decoded once
  std::string der;      // exactly as embedded in the documents (and as i2d_X509 writes it)
  std::string subject;  // one line, as SignedDocument::signer_subject
  std::chrono::system_clock::time_point not_after;  // the signer's own, for the identity cache
  // The verified chain's validity: its latest notBefore and its earliest notAfter. The chain
  // (and so the full check) passes X509_verify_cert's time check exactly while both hold.
  Asn1TimePtr chain_not_before;
  Asn1TimePtr chain_not_after;

  // Whether now (the system clock, as X509_verify_cert uses without
  // X509_V_FLAG_USE_CHECK_TIME) is inside the chain's validity, compared as OpenSSL's
  // ossl_x509_check_cert_time does: notBefore <= now < notAfter, by X509_cmp_time.
  bool ChainValidNow() const;
};

// The verified chain's validity window for `signer`: the latest notBefore and the earliest
// notAfter over `chain` (X509_STORE_CTX_get0_chain after X509_verify_cert succeeded).
// InvalidArgument for an empty chain or a time that does not compare (it did, for the chain to
// verify); Internal when OpenSSL cannot copy a time.
Status SetChainWindow(STACK_OF(X509) * chain, CachedSigner* signer);

// At most `capacity` signers by the SHA-256 of their DER; the least recently used goes when
// full. A mutex guards a few map operations, never a cryptographic one. capacity 0: holds
// nothing (Find always misses).
class SignerCache {
 public:
  explicit SignerCache(size_t capacity) : capacity_(capacity) {}

  // The entry for `digest`, now the most recently used; nullptr if none.
  std::shared_ptr<const CachedSigner> Find(const ossl::Sha256Digest& digest);
  // Adds or replaces the entry for `digest`, evicting the least recently used when full.
  void Insert(const ossl::Sha256Digest& digest, std::shared_ptr<const CachedSigner> signer);
  // Drops the entry for `digest` if it is still `signer` (another thread may have replaced it).
  void Erase(const ossl::Sha256Digest& digest, const CachedSigner* signer);

  size_t capacity() const { return capacity_; }
  size_t size() const;

 private:
  using Lru = std::list<std::pair<ossl::Sha256Digest, std::shared_ptr<const CachedSigner>>>;

  const size_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;  // front: most recently used
  std::unordered_map<ossl::Sha256Digest, Lru::iterator, ossl::Sha256DigestHash> index_;
};

}  // namespace hotfix::service
