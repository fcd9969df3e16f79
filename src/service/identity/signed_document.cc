#include "service/identity/signed_document.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

#include "common/base64.h"

namespace hotfix::service {
namespace {

using TimePoint = std::chrono::system_clock::time_point;
using ossl::BioPtr;
using ossl::MdPtr;
using ossl::Pkcs7Ptr;
using ossl::StorePtr;
using ossl::X509Ptr;
struct FreeX509Stack {  // sk_X509_free is a macro, so not a Deleter<> argument
  void operator()(STACK_OF(X509) * stack) const { sk_X509_free(stack); }
};
using SignerStack = std::unique_ptr<STACK_OF(X509), FreeX509Stack>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, ossl::Deleter<X509_STORE_CTX_free>>;

std::string DrainErrors() { return ossl::DrainErrorsOr("no OpenSSL error queued"); }

SignedDocument Refuse(IdentityFailure failure, Status error) {
  ERR_clear_error();
  SignedDocument out;
  out.failure = failure;
  out.error = std::move(error);
  return out;
}

SignedDocument Malformed(std::string what) {
  return Refuse(IdentityFailure::kMalformed, Status::InvalidArgument("attested document " + what));
}

// Exactly one DER PKCS#7 SignedData over embedded id-data content, nothing after it.
StatusOr<Pkcs7Ptr> ParseSignedData(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  const auto* end = p + der.size();
  Pkcs7Ptr p7(d2i_PKCS7(nullptr, &p, static_cast<long>(der.size())));
  if (!p7) return Status::InvalidArgument("is not DER PKCS#7: " + DrainErrors());
  if (p != end) return Status::InvalidArgument("has bytes after the PKCS#7 structure");
  if (!PKCS7_type_is_signed(p7.get())) return Status::InvalidArgument("is not PKCS#7 SignedData");
  // IMDS embeds the document; detached SignedData would have us verify nothing.
  PKCS7* inner = p7->d.sign == nullptr ? nullptr : p7->d.sign->contents;
  if (inner == nullptr || !PKCS7_type_is_data(inner) || PKCS7_get_detached(p7.get())) {
    return Status::InvalidArgument("does not embed its signed content");
  }
  return p7;
}

bool ParametersAbsentOrNull(const X509_ALGOR* alg) {
  int type = V_ASN1_UNDEF;
  X509_ALGOR_get0(nullptr, &type, nullptr, alg);
  return type == V_ASN1_UNDEF || type == V_ASN1_NULL;
}

std::string AlgorithmName(const X509_ALGOR* alg) {
  char name[80];
  OBJ_obj2txt(name, sizeof(name), alg->algorithm, 0);
  return name;
}

// PKCS#7 signs the content and the signed attributes, not the envelope around them: the
// versions, the algorithm identifiers and their parameters can change without breaking the
// signature, and PKCS7_verify reads few of them. Each such variant of a genuine document would
// cost a full verification and a cache entry of its own, so only the one spelling IMDS (and
// OpenSSL's PKCS7_sign) produces is accepted, checked before any signature work: DER that
// re-encodes to itself, version 1 throughout, one SignerInfo, a SHA-2 digest with absent or NULL
// parameters listed alone in digestAlgorithms, and a signature algorithm that fits the signer's
// key and digest. CheckCanonical is the first half, CheckEnvelope the rest.
Status CheckCanonical(PKCS7* p7, std::string_view der) {
  unsigned char* encoded = nullptr;
  int n = i2d_PKCS7(p7, &encoded);
  bool canonical = n > 0 && static_cast<size_t>(n) == der.size() &&
                   std::memcmp(encoded, der.data(), der.size()) == 0;
  OPENSSL_free(encoded);
  if (!canonical) return Status::InvalidArgument("is not in DER's single encoding");
  return Status::Ok();
}

// `certs` is where the signer's certificate is looked up: the document's own (what
// PKCS7_cert_from_signer_info searches) or, for a document parsed without it, a stack
// holding the cached certificate whose exact bytes it embeds.
Status CheckEnvelope(PKCS7* p7, STACK_OF(X509) * certs) {
  PKCS7_SIGNED* signed_data = p7->d.sign;
  if (long v = ASN1_INTEGER_get(signed_data->version); v != 1) {
    return Status::InvalidArgument("has SignedData version " + std::to_string(v) + ", not 1");
  }
  STACK_OF(PKCS7_SIGNER_INFO)* infos = PKCS7_get_signer_info(p7);
  if (int count = sk_PKCS7_SIGNER_INFO_num(infos); count != 1) {
    return Status::InvalidArgument("has " + std::to_string(std::max(count, 0)) +
                                   " SignerInfos, not 1");
  }
  PKCS7_SIGNER_INFO* info = sk_PKCS7_SIGNER_INFO_value(infos, 0);
  if (long v = ASN1_INTEGER_get(info->version); v != 1) {
    return Status::InvalidArgument("has SignerInfo version " + std::to_string(v) + ", not 1");
  }
  const X509_ALGOR* digest = info->digest_alg;
  int digest_nid = OBJ_obj2nid(digest->algorithm);
  if (digest_nid != NID_sha256 && digest_nid != NID_sha384 && digest_nid != NID_sha512) {
    return Status::InvalidArgument("digest algorithm " + AlgorithmName(digest) +
                                   " is not SHA-256, SHA-384 or SHA-512");
  }
  if (!ParametersAbsentOrNull(digest)) {
    return Status::InvalidArgument("digest algorithm parameters are neither absent nor NULL");
  }
  if (sk_X509_ALGOR_num(signed_data->md_algs) != 1 ||
      X509_ALGOR_cmp(sk_X509_ALGOR_value(signed_data->md_algs, 0), digest) != 0) {
    return Status::InvalidArgument("digestAlgorithms is not exactly the signer's digest");
  }
  const X509_ALGOR* signature = info->digest_enc_alg;
  if (!ParametersAbsentOrNull(signature)) {
    return Status::InvalidArgument("signature algorithm parameters are neither absent nor NULL");
  }
  // A bare key type (rsaEncryption, what PKCS7_sign writes for RSA) or a combined one
  // (ecdsa-with-SHA256) whose digest must then be the SignerInfo's.
  int signature_nid = OBJ_obj2nid(signature->algorithm);
  int signature_digest = NID_undef;
  int signature_key = signature_nid;
  if (OBJ_find_sigid_algs(signature_nid, &signature_digest, &signature_key) == 1 &&
      signature_digest != digest_nid) {
    return Status::InvalidArgument("signature algorithm " + AlgorithmName(signature) +
                                   " does not use the SignerInfo's digest");
  }
  // PKCS7_cert_from_signer_info's lookup, on `certs`.
  X509* signer = X509_find_by_issuer_and_serial(certs, info->issuer_and_serial->issuer,
                                                info->issuer_and_serial->serial);
  if (signer == nullptr) return Status::InvalidArgument("does not carry its signer's certificate");
  // The lookup above compares names canonically (case and spaces folded), so the SignerInfo's
  // issuer could be spelled differently from the certificate's; only the exact bytes pass.
  const unsigned char* named = nullptr;
  const unsigned char* issued = nullptr;
  size_t named_len = 0;
  size_t issued_len = 0;
  if (X509_NAME_get0_der(info->issuer_and_serial->issuer, &named, &named_len) != 1 ||
      X509_NAME_get0_der(X509_get_issuer_name(signer), &issued, &issued_len) != 1 ||
      named_len != issued_len || std::memcmp(named, issued, named_len) != 0) {
    return Status::InvalidArgument("SignerInfo names its issuer unlike the signer's certificate");
  }
  EVP_PKEY* key = X509_get0_pubkey(signer);
  if (key == nullptr || signature_nid == NID_undef || signature_key != EVP_PKEY_get_base_id(key)) {
    return Status::InvalidArgument("signature algorithm " + AlgorithmName(signature) +
                                   " does not fit the signer's key");
  }
  return Status::Ok();
}

// ASN1_TIME -> time_point without timegm (the calendar arithmetic is std::chrono's).
TimePoint NotAfter(X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return TimePoint::min();
  using namespace std::chrono;
  year_month_day day{year(tm.tm_year + 1900), month(static_cast<unsigned>(tm.tm_mon + 1)),
                     std::chrono::day(static_cast<unsigned>(tm.tm_mday))};
  return sys_days(day) + hours(tm.tm_hour) + minutes(tm.tm_min) + seconds(tm.tm_sec);
}

std::string SubjectOf(X509* cert) {
  char name[256];
  X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof(name));
  return name;
}

// The full check of a document's DER, the reference for the shortcuts of the kept
// certificates (SignedDocumentVerifier::AnswerFromKeptCertificate). When `parsed` is not null
// and the document passed the envelope checks, it receives the parsed document, for the
// verifier to keep its certificate: trusted (the answer is ok) or refused.
SignedDocument CheckSignedDer(std::string_view der, X509_STORE* roots, std::string_view signer_name,
                              Pkcs7Ptr* parsed) {
  StatusOr<Pkcs7Ptr> p7 = ParseSignedData(der);
  if (!p7.ok()) return Malformed(p7.status().message());
  PKCS7* signed_data = p7->get();
  if (Status form = CheckCanonical(signed_data, der); !form.ok()) return Malformed(form.message());
  if (Status form = CheckEnvelope(signed_data, signed_data->d.sign->cert); !form.ok()) {
    return Malformed(form.message());
  }
  if (parsed != nullptr) *parsed = std::move(p7).value();

  // The embedded certificates (no NOINTERN: IMDS ships its signer in the document) are
  // untrusted chain material; trust comes only from `roots`. BINARY: the content is JSON
  // bytes, not S/MIME text to canonicalise.
  BioPtr content(BIO_new(BIO_s_mem()));
  if (PKCS7_verify(signed_data, nullptr, roots, nullptr, content.get(), PKCS7_BINARY) != 1) {
    return Refuse(
        IdentityFailure::kUntrustedSigner,
        Status::PermissionDenied("attested document signature does not verify: " + DrainErrors()));
  }
  SignerStack signers(PKCS7_get0_signers(signed_data, nullptr, 0));
  // One signer is what IMDS produces; with several, whose name would the identity carry?
  if (!signers || sk_X509_num(signers.get()) != 1) {
    return Malformed("has " + std::to_string(signers ? sk_X509_num(signers.get()) : 0) +
                     " signers, not 1");
  }
  X509* signer = sk_X509_value(signers.get(), 0);
  SignedDocument out;
  out.signer_subject = SubjectOf(signer);
  out.signer_not_after = NotAfter(signer);
  if (!signer_name.empty()) {
    // A wildcard certificate (*.azure.com) is a TLS server's, never IMDS's signer: the name
    // must be the certificate's own. With a leading-dot name OpenSSL matches the certificate's
    // names by suffix, a wildcard SAN's text included (crypto/x509/v3_utl.c, equal_nocase), so
    // the name it matched is checked too.
    char* matched = nullptr;
    const int found = X509_check_host(signer, signer_name.data(), signer_name.size(),
                                      X509_CHECK_FLAG_NO_WILDCARDS, &matched);
    const bool wildcard = matched != nullptr && std::strchr(matched, '*') != nullptr;
    OPENSSL_free(matched);
    if (found != 1 || wildcard) {
      return Refuse(IdentityFailure::kWrongSigner,
                    Status::PermissionDenied("attested document signer " + out.signer_subject +
                                             " is not issued for " + std::string(signer_name) +
                                             " (DNS subjectAltNames, no wildcards; CN only "
                                             "without them)"));
    }
    // IMDS's signer is a TLS certificate of Azure's TLS issuing CAs, which carry the
    // serverAuth extended key usage; a certificate of any purpose (no EKU) or another one
    // (S/MIME, code signing) under the same roots is not IMDS's.
    if ((X509_get_extension_flags(signer) & EXFLAG_XKUSAGE) == 0 ||
        (X509_get_extended_key_usage(signer) & XKU_SSL_SERVER) == 0) {
      return Refuse(IdentityFailure::kWrongSigner,
                    Status::PermissionDenied("attested document signer " + out.signer_subject +
                                             " lacks the serverAuth extended key usage that "
                                             "IMDS's signer carries"));
    }
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(content.get(), &data);
  out.content.assign(data == nullptr ? "" : data, len > 0 ? static_cast<size_t>(len) : 0);
  ERR_clear_error();
  return out;
}

// X509_verify_cert over the chain of `p7`'s one embedded certificate, set up as PKCS7_verify
// sets it up (crypto/pkcs7/pk7_smime.c, PKCS7_verify): the document's certificates as the
// untrusted ones, the "smime_sign" defaults under the store's own parameters (purpose any,
// LoadTrustRoots), no CRLs. So its verdict and chain are the ones PKCS7_verify reached for
// this certificate, which it checks before the signature. nullopt unless `p7` embeds exactly
// one certificate and no CRLs, the only layout the kept certificates' shortcuts take.
struct ChainCheck {
  StoreCtxPtr ctx;  // the chain built and the error found (X509_STORE_CTX_get0_chain, _get_error)
  bool verified = false;
};
std::optional<ChainCheck> CheckChainOfOnlyCertificate(PKCS7* p7, X509_STORE* roots) {
  STACK_OF(X509)* embedded = p7->d.sign->cert;
  if (sk_X509_num(embedded) != 1 || p7->d.sign->crl != nullptr) return std::nullopt;
  ChainCheck check{StoreCtxPtr(X509_STORE_CTX_new())};
  if (!check.ctx ||
      X509_STORE_CTX_init(check.ctx.get(), roots, sk_X509_value(embedded, 0), embedded) != 1 ||
      X509_STORE_CTX_set_default(check.ctx.get(), "smime_sign") != 1) {
    ERR_clear_error();
    return std::nullopt;
  }
  check.verified = X509_verify_cert(check.ctx.get()) == 1;
  ERR_clear_error();
  return check;
}

// The certificate's DER as i2d_X509 writes it (for a parsed certificate, the bytes it was
// parsed from: OpenSSL keeps them).
std::string DerOf(X509* cert) {
  unsigned char* der = nullptr;
  const int len = i2d_X509(cert, &der);
  std::string out(reinterpret_cast<const char*>(der), len > 0 ? static_cast<size_t>(len) : 0);
  OPENSSL_free(der);
  return out;
}

// The PEM bundle the signer must chain to, as a store of at least one certificate.
StatusOr<StorePtr> LoadTrustRoots(std::string_view pem, bool anchors_are_issuers = false) {
  StatusOr<std::vector<X509Ptr>> certs = ossl::ParsePemCertificates(pem);
  if (!certs.ok()) return certs.status().Annotate("attested document trust roots");
  StorePtr store(X509_STORE_new());
  if (!store) return Status::Internal("allocating the trust store: " + DrainErrors());
  for (const X509Ptr& cert : *certs) {
    if (X509_STORE_add_cert(store.get(), cert.get()) != 1) {
      return Status::InvalidArgument("adding a trust root: " + DrainErrors());
    }
  }
  // PKCS7_verify would otherwise check the chain for S/MIME signing (an emailProtection EKU
  // when an EKU is present). IMDS's signer is a TLS-style certificate for metadata.azure.com
  // (EKU serverAuth/clientAuth); what binds it to IMDS is the chain plus the name check, so
  // the purpose is "any". CA constraints on the chain are still enforced.
  X509_STORE_set_purpose(store.get(), X509_PURPOSE_ANY);
  // --attestation-issuers: each certificate is an anchor as it is, self-signed or not
  // (crypto/x509/x509_vfy.c, X509_V_FLAG_PARTIAL_CHAIN), so the chain ends at the pinned
  // issuer and nothing above it is trusted.
  if (anchors_are_issuers) X509_STORE_set_flags(store.get(), X509_V_FLAG_PARTIAL_CHAIN);
  return store;
}

// The document without its certificate, parsed, and `cert` as the stack its signer is looked
// up in: when the document passes the full check's envelope checks (CheckCanonical,
// CheckEnvelope) with `cert` standing for the certificate whose exact bytes it embeds. d2i_PKCS7
// of the stripped document decodes no key; it is DER exactly when the document is
// (SplitOffCertificate), and it parses exactly as the document does but for the
// certificates, which are `cert`'s bytes. nullopt: let the full check answer.
struct StrippedDocument {
  Pkcs7Ptr p7;
  SignerStack certs;
};
std::optional<StrippedDocument> EnvelopeAround(const SplitSignedData& split, X509* cert) {
  StatusOr<Pkcs7Ptr> p7 = ParseSignedData(split.stripped);
  if (!p7.ok() || !CheckCanonical(p7->get(), split.stripped).ok()) return std::nullopt;
  SignerStack certs(sk_X509_new_null());
  if (!certs || sk_X509_push(certs.get(), cert) <= 0) return std::nullopt;
  if (!CheckEnvelope(p7->get(), certs.get()).ok()) return std::nullopt;
  return StrippedDocument{std::move(p7).value(), std::move(certs)};
}

}  // namespace

StatusOr<std::string> DecodeToken(std::string_view token) {
  // gRPC metadata cannot carry line breaks anyway; refusing them keeps one spelling per
  // document rather than relying on the decoder skipping them.
  // Two scans, each one memchr: find_first_of("\r\n") calls memchr once per byte of the
  // token (libstdc++), about 5 us a call for an IMDS-sized document.
  if (token.find('\n') != std::string_view::npos || token.find('\r') != std::string_view::npos) {
    return Status::InvalidArgument("attested document is not base64 (line break)");
  }
  StatusOr<std::string> der = DecodeStdBase64(token);
  if (!der.ok()) {
    return Status::InvalidArgument("attested document is not base64: " + der.status().message());
  }
  return der;
}

StatusOr<std::unique_ptr<SignedDocumentVerifier>> SignedDocumentVerifier::Create(
    const AttestedDocumentOptions& options) {
  StatusOr<StorePtr> roots = LoadTrustRoots(options.trust_roots_pem, options.anchors_are_issuers);
  if (!roots.ok()) return roots.status();
  MdPtr sha256(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  if (!sha256) return Status::Internal("fetching SHA-256: " + DrainErrors());
  return std::unique_ptr<SignedDocumentVerifier>(
      new SignedDocumentVerifier(std::move(roots).value(), options, std::move(sha256)));
}

SignedDocumentVerifier::SignedDocumentVerifier(StorePtr roots,
                                               const AttestedDocumentOptions& options, MdPtr sha256)
    : roots_(std::move(roots)),
      signer_name_(options.signer_name),
      sha256_(std::move(sha256)),
      signers_(options.signer_cache_entries),
      refused_signers_(options.signer_refusal_slots == 0
                           ? nullptr
                           : std::make_unique<RefusedSigners>(options.signer_refusal_slots,
                                                              options.refusal_cache_ttl)) {}

SignedDocument SignedDocumentVerifier::Verify(std::string_view der, TimePoint now) {
  if (std::optional<SignedDocument> answer = AnswerFromKeptCertificate(der, now)) return *answer;
  ERR_clear_error();  // nothing the shortcut queued may reach the full check's messages
  Pkcs7Ptr parsed;
  SignedDocument signed_doc = CheckSignedDer(der, roots_.get(), signer_name_, &parsed);
  if (parsed && signed_doc.ok()) RememberSigner(parsed.get(), signed_doc);
  if (parsed && signed_doc.failure == IdentityFailure::kUntrustedSigner) {
    RememberRefusedSigner(parsed.get(), signed_doc, now);
  }
  return signed_doc;
}

// The full check's answer for `der` (CheckSignedDer) when the certificate it embeds is kept,
// trusted (the signer cache) or refused (the refused signers), without parsing that
// certificate again or building its chain again; nullopt: run the full check. The shortcuts
// only answer where the full check would give the same answer: a document whose layout is
// not IMDS's (SplitOffCertificate), that does not parse, is not DER or fails an envelope
// check goes to the full check, which refuses it with its own message.
std::optional<SignedDocument> SignedDocumentVerifier::AnswerFromKeptCertificate(
    std::string_view der, TimePoint now) {
  if (signers_.capacity() == 0 && !refused_signers_) return std::nullopt;
  std::optional<SplitSignedData> split = SplitOffCertificate(der);
  if (!split) return std::nullopt;
  std::optional<ossl::Sha256Digest> digest = ossl::Sha256(sha256_.get(), split->certificate);
  if (!digest) return std::nullopt;
  if (std::shared_ptr<const CachedSigner> signer = signers_.Find(*digest)) {
    return VerifyWithCachedSigner(*split, *digest, std::move(signer));
  }
  if (!refused_signers_) return std::nullopt;
  std::optional<std::shared_ptr<const RefusedSigner>> refused =
      refused_signers_->Find(*digest, now);
  if (!refused || !*refused) return std::nullopt;
  return RefuseAsBefore(*split, **refused);
}

// A trusted certificate: what remains is the signature, which PKCS7_verify checks exactly as
// in the full check, with the signer taken from the cache (NOINTERN) and the chain not rebuilt
// (NOVERIFY): the full check would build it from the same certificate, the same untrusted set
// (that certificate alone) and the same store, at a time inside the window where it verified;
// outside that window the full check answers.
std::optional<SignedDocument> SignedDocumentVerifier::VerifyWithCachedSigner(
    const SplitSignedData& split, const ossl::Sha256Digest& digest,
    std::shared_ptr<const CachedSigner> signer) {
  if (signer->der != split.certificate) return std::nullopt;
  if (!signer->ChainValidNow()) {
    // X509_verify_cert would refuse the chain now ("certificate has expired" or "is not
    // yet valid"): the full check says so, and caches the certificate again if it is valid.
    signers_.Erase(digest, signer.get());
    return std::nullopt;
  }
  std::optional<StrippedDocument> doc = EnvelopeAround(split, signer->cert.get());
  if (!doc) return std::nullopt;

  signer_cache_hits_.fetch_add(1, std::memory_order_relaxed);
  BioPtr content(BIO_new(BIO_s_mem()));
  if (PKCS7_verify(doc->p7.get(), doc->certs.get(), roots_.get(), nullptr, content.get(),
                   PKCS7_BINARY | PKCS7_NOINTERN | PKCS7_NOVERIFY) != 1) {
    return Refuse(
        IdentityFailure::kUntrustedSigner,
        Status::PermissionDenied("attested document signature does not verify: " + DrainErrors()));
  }
  // CheckEnvelope found the cached certificate as the one SignerInfo's signer, so this is
  // it; the full check's count of signers, kept as a guard.
  SignerStack signers(PKCS7_get0_signers(doc->p7.get(), doc->certs.get(), PKCS7_NOINTERN));
  if (!signers || sk_X509_num(signers.get()) != 1 ||
      sk_X509_value(signers.get(), 0) != signer->cert.get()) {
    return std::nullopt;
  }
  // X509_check_host passed for signer_name_ before the certificate was cached.
  SignedDocument out;
  out.signer_subject = signer->subject;
  out.signer_not_after = signer->not_after;
  char* data = nullptr;
  long len = BIO_get_mem_data(content.get(), &data);
  out.content.assign(data == nullptr ? "" : data, len > 0 ? static_cast<size_t>(len) : 0);
  ERR_clear_error();
  return out;
}

// A refused certificate: the full check would pass the envelope (as here), then PKCS7_verify
// would build the same chain from the same certificate, untrusted set and store, fail it
// before looking at the signature (CheckChainOfOnlyCertificate), and answer with the same message.
// The one difference is time, and only certificates that time does not make valid are kept.
std::optional<SignedDocument> SignedDocumentVerifier::RefuseAsBefore(const SplitSignedData& split,
                                                                     const RefusedSigner& refused) {
  if (refused.der != split.certificate) return std::nullopt;
  if (!EnvelopeAround(split, refused.cert.get())) return std::nullopt;
  signer_refusal_hits_.fetch_add(1, std::memory_order_relaxed);
  return Refuse(refused.failure, refused.error);
}

// After the full check accepted `p7` (chain and signer name): keep its signer certificate, so that
// a later document embedding it costs its signature. PKCS7_verify does not expose the chain it
// verified, so it is built again here, once per certificate; it gives the validity window.
void SignedDocumentVerifier::RememberSigner(PKCS7* p7, const SignedDocument& signed_doc) {
  if (signers_.capacity() == 0) return;
  std::optional<ChainCheck> chain = CheckChainOfOnlyCertificate(p7, roots_.get());
  if (!chain || !chain->verified) return;
  auto entry = std::make_shared<CachedSigner>();
  X509* cert = sk_X509_value(p7->d.sign->cert, 0);
  entry->der = DerOf(cert);
  if (entry->der.empty() ||
      !SetChainWindow(X509_STORE_CTX_get0_chain(chain->ctx.get()), entry.get()).ok() ||
      X509_up_ref(cert) != 1) {
    ERR_clear_error();
    return;
  }
  entry->cert.reset(cert);
  entry->subject = signed_doc.signer_subject;
  entry->not_after = signed_doc.signer_not_after;
  if (std::optional<ossl::Sha256Digest> digest = ossl::Sha256(sha256_.get(), entry->der))
    signers_.Insert(*digest, entry);
  ERR_clear_error();
}

// After the full check refused `p7` as untrusted: keep its certificate when the refusal was
// the chain's (not the signature's: the chain then verifies here) and no later time can make
// the chain valid (not X509_V_ERR_CERT_NOT_YET_VALID), so that a later document embedding it
// is refused for a parse of its envelope. An attacker then needs a new certificate, and a key
// of its own, for every document that costs a chain. Certificates over kMaxRefusedSignerBytes
// are not kept: the table's memory is the attacker's choice of certificate otherwise.
void SignedDocumentVerifier::RememberRefusedSigner(PKCS7* p7, const SignedDocument& signed_doc,
                                                   TimePoint now) {
  if (!refused_signers_ || sk_X509_num(p7->d.sign->cert) != 1) return;
  X509* cert = sk_X509_value(p7->d.sign->cert, 0);
  auto entry = std::make_shared<RefusedSigner>();
  entry->der = DerOf(cert);  // encoded once: its size decides, and it is what is kept
  if (entry->der.empty() || entry->der.size() > kMaxRefusedSignerBytes) return;
  std::optional<ChainCheck> chain = CheckChainOfOnlyCertificate(p7, roots_.get());
  if (!chain || chain->verified ||
      X509_STORE_CTX_get_error(chain->ctx.get()) == X509_V_ERR_CERT_NOT_YET_VALID) {
    return;
  }
  if (X509_up_ref(cert) != 1) {
    ERR_clear_error();
    return;
  }
  entry->cert.reset(cert);
  entry->failure = signed_doc.failure;
  entry->error = signed_doc.error;
  if (std::optional<ossl::Sha256Digest> digest = ossl::Sha256(sha256_.get(), entry->der)) {
    refused_signers_->Insert(*digest, std::move(entry), now);
  }
  ERR_clear_error();
}

SignedDocument VerifySignedDocument(std::string_view token, std::string_view trust_roots_pem,
                                    std::string_view signer_name) {
  StatusOr<StorePtr> roots = LoadTrustRoots(trust_roots_pem);
  if (!roots.ok()) return Refuse(IdentityFailure::kUntrustedSigner, roots.status());
  StatusOr<std::string> der = DecodeToken(token);
  if (!der.ok()) return Refuse(IdentityFailure::kMalformed, der.status());
  return CheckSignedDer(*der, roots->get(), signer_name, nullptr);
}

}  // namespace hotfix::service
