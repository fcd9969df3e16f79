#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pkcs7.h>

#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "authenticate_and_admit.h"
#include "common/base64.h"
#include "imds_standin.h"
#include "openssl_util.h"
#include "service/identity/attested_content.h"
#include "service/identity/node_identity.h"
#include "service/identity/signed_document.h"
#include "service/identity/signer_cache.h"
#include "test_certs.h"

namespace hotfix::service {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using std::chrono::system_clock;
using testing::HasSubstr;
using testing::Not;
using testsupport::AttestedDocumentFields;
using testsupport::CertAndKey;
using testsupport::ImdsSignerLeaf;
using testsupport::IssueImdsSigner;
using testsupport::KeyUsage;
using testsupport::LeafOptions;
using testsupport::TestCa;
namespace ossl = testsupport::ossl;

// The document's times are whole seconds, as IMDS writes them.
system_clock::time_point WholeSeconds(system_clock::time_point t) {
  return std::chrono::floor<seconds>(t);
}

std::string Reencode(const std::string& der) { return EncodeStdBase64(der); }

std::string DerOf(const std::string& token) {
  StatusOr<std::string> der = DecodeStdBase64(token);
  EXPECT_TRUE(der.ok()) << der.status().ToString();
  return der.ok() ? *der : "";
}

std::string PkcsToToken(PKCS7* p7) {
  ossl::BioPtr der(BIO_new(BIO_s_mem()));
  ossl::Check(i2d_PKCS7_bio(der.get(), p7) == 1, "encoding PKCS#7 DER");
  return Reencode(ossl::BioToString(der.get()));
}

class IdentityTest : public testing::Test {
 protected:
  IdentityTest() { auth_ = Make(Options()); }

  AttestedDocumentOptions Options() {
    AttestedDocumentOptions options;
    options.trust_roots_pem = root_.cert_pem();
    options.clock = [this] { return now_.load(); };
    return options;
  }

  std::unique_ptr<Authenticator> Make(AttestedDocumentOptions options) {
    auto made = NewAttestedDocumentAuthenticator(std::move(options));
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? std::move(made).value() : nullptr;
  }

  // A document as IMDS would issue it at the fake now.
  AttestedDocumentFields Fields(std::string vm_id = "vm-1") const {
    AttestedDocumentFields fields;
    fields.vm_id = std::move(vm_id);
    fields.subscription_id = "sub-1";
    fields.sku = "aks-ubuntu";
    fields.created_on = now_.load();
    fields.expires_on = now_.load() + hours(6);
    return fields;
  }

  std::string Sign(const AttestedDocumentFields& fields) const {
    return testsupport::SignAttestedContent(testsupport::AttestedDocumentJson(fields), signer_);
  }
  std::string SignJson(const nlohmann::json& doc) const {
    return testsupport::SignAttestedContent(doc.dump(), signer_);
  }
  nlohmann::json Doc() const {
    return nlohmann::json::parse(testsupport::AttestedDocumentJson(Fields()));
  }

  // Refused for `failure`, with a message that does not echo the token, and no OpenSSL error
  // left queued for the next user of this thread.
  AuthResult ExpectRefused(const std::string& token, IdentityFailure failure) {
    AuthResult result = AuthenticateAndAdmit(*auth_, token);
    EXPECT_FALSE(result.ok());
    EXPECT_EQ(IdentityFailureName(result.failure), std::string(IdentityFailureName(failure)))
        << result.error.ToString();
    EXPECT_FALSE(result.error.message().empty());
    if (token.size() >= 24) {
      EXPECT_THAT(result.error.message(), Not(HasSubstr(token.substr(token.size() / 2, 24))));
    }
    EXPECT_EQ(ERR_peek_error(), 0ul);
    return result;
  }

  TestCa root_ = TestCa::Create("test-imds-root");
  CertAndKey signer_ = IssueImdsSigner(root_);
  std::atomic<system_clock::time_point> now_{system_clock::now()};
  std::unique_ptr<Authenticator> auth_;
};

TEST(IdentityFailureNameTest, NamesEveryReason) {
  EXPECT_STREQ(IdentityFailureName(IdentityFailure::kMissing), "missing");
  EXPECT_STREQ(IdentityFailureName(IdentityFailure::kMalformed), "malformed");
  EXPECT_STREQ(IdentityFailureName(IdentityFailure::kUntrustedSigner), "untrusted_signer");
  EXPECT_STREQ(IdentityFailureName(IdentityFailure::kWrongSigner), "wrong_signer");
  EXPECT_STREQ(IdentityFailureName(IdentityFailure::kBadContent), "bad_content");
  EXPECT_STREQ(IdentityFailureName(IdentityFailure::kExpired), "expired");
}

TEST_F(IdentityTest, ValidDocumentGivesItsIdentity) {
  AttestedDocumentFields fields = Fields("02aab8a4-74ef-476e-8182-f6d2ba4166a6");
  AuthResult result = AuthenticateAndAdmit(*auth_, Sign(fields));
  ASSERT_TRUE(result.ok()) << result.error.ToString();
  EXPECT_EQ(result.identity.vm_id, "02aab8a4-74ef-476e-8182-f6d2ba4166a6");
  EXPECT_EQ(result.identity.subscription_id, "sub-1");
  EXPECT_EQ(result.identity.sku, "aks-ubuntu");
  EXPECT_EQ(result.identity.expires_at, WholeSeconds(fields.expires_on));
  EXPECT_FALSE(result.identity.insecure);
  AuthenticatorStats stats = auth_->stats();
  EXPECT_EQ(stats.verifications, 1u);
  EXPECT_EQ(stats.cache_hits, 0u);
  EXPECT_EQ(stats.cache_entries, 1u);
}

TEST_F(IdentityTest, SecondCallIsACacheHit) {
  std::string token = Sign(Fields());
  AuthResult first = AuthenticateAndAdmit(*auth_, token);
  AuthResult second = AuthenticateAndAdmit(*auth_, token);
  ASSERT_TRUE(first.ok()) << first.error.ToString();
  ASSERT_TRUE(second.ok()) << second.error.ToString();
  EXPECT_EQ(second.identity.vm_id, first.identity.vm_id);
  EXPECT_EQ(second.identity.subscription_id, first.identity.subscription_id);
  EXPECT_EQ(second.identity.expires_at, first.identity.expires_at);
  AuthenticatorStats stats = auth_->stats();
  EXPECT_EQ(stats.verifications, 1u);
  EXPECT_EQ(stats.cache_hits, 1u);
}

// The service turned it away after authentication (allow-list, rate limit): never kept.
TEST_F(IdentityTest, AnIdentityNotAdmittedIsNotKept) {
  std::string token = Sign(Fields());
  AuthResult first = auth_->Authenticate(token);
  ASSERT_TRUE(first.ok()) << first.error.ToString();
  ASSERT_TRUE(first.remember.has_value());
  EXPECT_EQ(auth_->stats().cache_entries, 0u);
  AuthResult second = auth_->Authenticate(token);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(auth_->stats().verifications, 2u);  // verified in full again
  EXPECT_EQ(auth_->stats().cache_hits, 0u);
  auth_->Admit(second.identity, *second.remember);
  EXPECT_EQ(auth_->stats().cache_entries, 1u);
  AuthResult third = auth_->Authenticate(token);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third.remember.has_value());  // answered from the cache
  EXPECT_EQ(auth_->stats().cache_hits, 1u);
}

// A ticket is its own authenticator's: another (the roots before a reload) ignores it.
TEST_F(IdentityTest, AnotherAuthenticatorsTicketIsIgnored) {
  std::unique_ptr<Authenticator> other = Make(Options());
  AuthResult result = other->Authenticate(Sign(Fields()));
  ASSERT_TRUE(result.ok() && result.remember);
  auth_->Admit(result.identity, *result.remember);
  EXPECT_EQ(auth_->stats().cache_entries, 0u);
}

TEST_F(IdentityTest, CachedDocumentExpiresWithoutAnotherVerification) {
  std::string token = Sign(Fields());
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, token).ok());
  now_ = now_.load() + hours(6) + seconds(1);
  ExpectRefused(token, IdentityFailure::kExpired);
  EXPECT_EQ(auth_->stats().verifications, 1u);
  EXPECT_EQ(auth_->stats().cache_hits, 1u);
}

TEST_F(IdentityTest, ExpiredDocumentIsRefusedAndNotCached) {
  AttestedDocumentFields fields = Fields();
  fields.created_on = now_.load() - hours(7);
  fields.expires_on = now_.load() - minutes(1);
  std::string token = Sign(fields);
  ExpectRefused(token, IdentityFailure::kExpired);
  ExpectRefused(token, IdentityFailure::kExpired);  // the refusal repeated
  EXPECT_EQ(auth_->stats().verifications, 1u);
  EXPECT_EQ(auth_->stats().refusal_cache_hits, 1u);
  EXPECT_EQ(auth_->stats().cache_entries, 0u);
}

TEST_F(IdentityTest, CreatedMoreThanFiveMinutesAheadIsRefused) {
  AttestedDocumentFields ahead = Fields();
  ahead.created_on = now_.load() + minutes(6);
  ahead.expires_on = ahead.created_on + hours(6);
  ExpectRefused(Sign(ahead), IdentityFailure::kExpired);

  AttestedDocumentFields skewed = Fields();  // a node clock a little ahead is tolerated
  skewed.created_on = now_.load() + minutes(4);
  skewed.expires_on = skewed.created_on + hours(6);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, Sign(skewed)).ok());
}

TEST_F(IdentityTest, ForeignCaIsUntrusted) {
  TestCa other = TestCa::Create("test-imds-root");  // same name, different key
  signer_ = IssueImdsSigner(other);
  EXPECT_THAT(ExpectRefused(Sign(Fields()), IdentityFailure::kUntrustedSigner).error.message(),
              HasSubstr("unable to get local issuer certificate"));
}

TEST_F(IdentityTest, ExpiredSignerCertificateIsUntrusted) {
  LeafOptions leaf = ImdsSignerLeaf();
  leaf.not_before = -hours(48);
  leaf.not_after = -hours(1);
  signer_ = root_.IssueLeaf(leaf);
  EXPECT_THAT(ExpectRefused(Sign(Fields()), IdentityFailure::kUntrustedSigner).error.message(),
              HasSubstr("certificate has expired"));
}

TEST_F(IdentityTest, TamperedContentIsUntrusted) {
  std::string der = DerOf(Sign(Fields("vm-aaaa")));
  size_t at = der.find("vm-aaaa");
  ASSERT_NE(at, std::string::npos);
  der[at + 3] = 'b';
  EXPECT_THAT(ExpectRefused(Reencode(der), IdentityFailure::kUntrustedSigner).error.message(),
              HasSubstr("signature failure"));
}

TEST_F(IdentityTest, SignerForAnotherNameIsWrongSigner) {
  signer_ = IssueImdsSigner(root_, "metadata.azure.com.evil.example");
  ExpectRefused(Sign(Fields()), IdentityFailure::kWrongSigner);
}

TEST_F(IdentityTest, CommonNameCountsOnlyWithoutDnsNames) {
  LeafOptions cn_only;
  cn_only.common_name = "metadata.azure.com";
  cn_only.usage = KeyUsage::kServerAuth;
  signer_ = root_.IssueLeaf(cn_only);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields())).ok());

  LeafOptions other_san = cn_only;
  other_san.dns_names = {"other.example"};
  signer_ = root_.IssueLeaf(other_san);
  ExpectRefused(Sign(Fields()), IdentityFailure::kWrongSigner);
}

TEST_F(IdentityTest, TheSignerMustCarryServerAuth) {
  // Azure's signer is a TLS certificate (serverAuth, clientAuth), not an S/MIME one: serverAuth
  // is required; a certificate of any purpose (no EKU) or of another is not IMDS's.
  for (KeyUsage usage : {KeyUsage::kServerAuth, KeyUsage::kServerAndClientAuth}) {
    LeafOptions leaf = ImdsSignerLeaf();
    leaf.usage = usage;
    signer_ = root_.IssueLeaf(leaf);
    AuthResult result = auth_->Authenticate(Sign(Fields()));
    EXPECT_TRUE(result.ok()) << static_cast<int>(usage) << ": " << result.error.ToString();
  }
  for (KeyUsage usage : {KeyUsage::kNone, KeyUsage::kClientAuth, KeyUsage::kCodeSigning}) {
    LeafOptions leaf = ImdsSignerLeaf();
    leaf.usage = usage;
    signer_ = root_.IssueLeaf(leaf);
    EXPECT_THAT(ExpectRefused(Sign(Fields()), IdentityFailure::kWrongSigner).error.message(),
                HasSubstr("lacks the serverAuth extended key usage"))
        << static_cast<int>(usage);
  }
}

TEST_F(IdentityTest, AWildcardCertificateIsNotTheSigner) {
  for (const char* san : {"*.azure.com", "*.metadata.azure.com"}) {
    LeafOptions leaf;
    leaf.common_name = "metadata.azure.com";  // ignored: the certificate has DNS names
    leaf.dns_names = {san};
    leaf.usage = KeyUsage::kServerAuth;
    signer_ = root_.IssueLeaf(leaf);
    ExpectRefused(Sign(Fields()), IdentityFailure::kWrongSigner);
  }
  // Nor for a leading-dot name: a wildcard stands for no name at all.
  AttestedDocumentOptions options = Options();
  options.signer_name = ".metadata.azure.com";
  auth_ = Make(options);
  ExpectRefused(Sign(Fields()), IdentityFailure::kWrongSigner);  // *.metadata.azure.com
}

// --attestation-issuers: the issuing CA is the anchor as it is. The signer it issued verifies
// with no root at all; a signer from another CA under the same root does not.
TEST_F(IdentityTest, PinnedIssuersAreTheAnchorsThemselves) {
  TestCa issuer = root_.IssueIntermediate("test-imds-issuing-ca");
  TestCa sibling = root_.IssueIntermediate("test-other-issuing-ca");
  AttestedDocumentOptions options = Options();
  options.trust_roots_pem = issuer.cert_pem();
  options.anchors_are_issuers = true;
  auth_ = Make(options);
  signer_ = IssueImdsSigner(issuer);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields())).ok());
  signer_ = IssueImdsSigner(sibling);
  ExpectRefused(Sign(Fields()), IdentityFailure::kUntrustedSigner);
  signer_ = IssueImdsSigner(root_);  // the root's own signer: nothing above the pin counts
  ExpectRefused(Sign(Fields()), IdentityFailure::kUntrustedSigner);

  // Without the pin, the same bundle is no anchor: it is not self-signed.
  options.anchors_are_issuers = false;
  auth_ = Make(options);
  signer_ = IssueImdsSigner(issuer);
  ExpectRefused(Sign(Fields()), IdentityFailure::kUntrustedSigner);
}

TEST_F(IdentityTest, LeadingDotAcceptsSubdomains) {
  AttestedDocumentOptions options = Options();
  options.signer_name = ".metadata.azure.com";
  auth_ = Make(options);
  signer_ = IssueImdsSigner(root_, "eastus.metadata.azure.com");
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields())).ok());
  signer_ = IssueImdsSigner(root_, "metadata.azure.com.evil.example");
  ExpectRefused(Sign(Fields()), IdentityFailure::kWrongSigner);
}

TEST_F(IdentityTest, IntermediateComesFromTheTrustBundle) {
  // IMDS embeds only its own certificate; the intermediate must be configured.
  TestCa intermediate = root_.IssueIntermediate("test-imds-intermediate");
  signer_ = IssueImdsSigner(intermediate);
  std::string token = Sign(Fields());
  EXPECT_THAT(ExpectRefused(token, IdentityFailure::kUntrustedSigner).error.message(),
              HasSubstr("unable to get local issuer certificate"));

  AttestedDocumentOptions options = Options();
  options.trust_roots_pem = root_.cert_pem() + intermediate.cert_pem();
  auth_ = Make(options);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, token).ok());
}

TEST_F(IdentityTest, OptionsWithoutRootsOrNameAreRefused) {
  AttestedDocumentOptions options = Options();
  options.trust_roots_pem = "";
  EXPECT_FALSE(NewAttestedDocumentAuthenticator(options).ok());
  options.trust_roots_pem = "-----BEGIN CERTIFICATE-----\nnot a cert\n-----END CERTIFICATE-----\n";
  EXPECT_FALSE(NewAttestedDocumentAuthenticator(options).ok());
  options = Options();
  options.signer_name = "";
  EXPECT_FALSE(NewAttestedDocumentAuthenticator(options).ok());
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

TEST_F(IdentityTest, EmptyTokenIsMissing) { ExpectRefused("", IdentityFailure::kMissing); }

TEST_F(IdentityTest, OversizedTokenIsMalformedBeforeAnyWork) {
  ExpectRefused(std::string(64 * 1024 + 1, 'A'), IdentityFailure::kMalformed);
  AttestedDocumentOptions options = Options();
  std::string token = Sign(Fields());
  options.max_token_bytes = token.size() - 1;
  auth_ = Make(options);
  ExpectRefused(token, IdentityFailure::kMalformed);
  EXPECT_EQ(auth_->stats().verifications, 0u);
}

TEST_F(IdentityTest, NonBase64IsMalformed) {
  ExpectRefused("not base64! secret-looking-token-value-1234567890", IdentityFailure::kMalformed);
  ExpectRefused("QUJD", IdentityFailure::kMalformed);  // base64 of "ABC": not DER
  std::string token = Sign(Fields());
  ExpectRefused(token.substr(0, 64) + "\n" + token.substr(64), IdentityFailure::kMalformed);
  ExpectRefused(token.substr(0, token.size() - 1), IdentityFailure::kMalformed);
}

TEST_F(IdentityTest, TruncatedOrPaddedDerIsMalformed) {
  std::string der = DerOf(Sign(Fields()));
  ExpectRefused(Reencode(der.substr(0, der.size() / 2)), IdentityFailure::kMalformed);
  ExpectRefused(Reencode(der.substr(0, der.size() - 1)), IdentityFailure::kMalformed);
  ExpectRefused(Reencode(der + std::string("\0\0", 2)), IdentityFailure::kMalformed);
}

// IMDS signs with RSA: PKCS7_sign writes rsaEncryption (NULL parameters) as its signature
// algorithm, which the strict-form check must accept as fitting an RSA key.
TEST_F(IdentityTest, RsaSignerAsImdsUsesIsAccepted) {
  signer_ = IssueImdsSigner(root_, "metadata.azure.com", testsupport::KeyType::kRsa2048);
  AuthResult result = AuthenticateAndAdmit(*auth_, Sign(Fields()));
  EXPECT_TRUE(result.ok()) << result.error.ToString();
}

// A genuine document with one unsigned envelope field changed (PKCS#7 signs only the content
// and signed attributes). Each still carries a valid signature, so without the strict-form
// check it would verify as the same node and take a cache entry of its own.
// Run with the signer cache cold and warm (holding signer_, so every variant embeds a cached
// certificate): the answers, messages included, are the full check's either way.
class EnvelopeVariantTest : public IdentityTest, public testing::WithParamInterface<bool> {
 protected:
  EnvelopeVariantTest() {
    if (GetParam()) {
      EXPECT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields("vm-warm"))).ok());
      EXPECT_EQ(auth_->stats().signer_cache_entries, 1u);
    }
  }
  template <typename Change>
  std::string Variant(Change change) {
    std::string der = DerOf(Sign(Fields()));
    const auto* p = reinterpret_cast<const unsigned char*>(der.data());
    ossl::Pkcs7Ptr p7(d2i_PKCS7(nullptr, &p, static_cast<long>(der.size())));
    EXPECT_NE(p7, nullptr);
    if (!p7) return "";
    change(p7.get());
    return PkcsToToken(p7.get());
  }
  PKCS7_SIGNER_INFO* Info(PKCS7* p7) {
    return sk_PKCS7_SIGNER_INFO_value(PKCS7_get_signer_info(p7), 0);
  }
  // Refused as malformed (the signature itself would verify), naming `what`.
  void ExpectEnvelopeRefused(const std::string& token, const std::string& what) {
    EXPECT_THAT(ExpectRefused(token, IdentityFailure::kMalformed).error.message(), HasSubstr(what));
  }
};

TEST_P(EnvelopeVariantTest, TheUnchangedDocumentStillVerifies) {
  AuthResult result = AuthenticateAndAdmit(*auth_, Variant([](PKCS7*) {}));
  EXPECT_TRUE(result.ok()) << result.error.ToString();
}

TEST_P(EnvelopeVariantTest, VersionsOtherThanOneAreRefused) {
  ExpectEnvelopeRefused(Variant([](PKCS7* p7) { ASN1_INTEGER_set(p7->d.sign->version, 3); }),
                        "SignedData version 3, not 1");
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) { ASN1_INTEGER_set(Info(p7)->version, 0); }),
                        "SignerInfo version 0, not 1");
}

TEST_P(EnvelopeVariantTest, DigestAlgorithmVariantsAreRefused) {
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) {
                          X509_ALGOR_set0(Info(p7)->digest_alg, OBJ_nid2obj(NID_sha1), V_ASN1_UNDEF,
                                          nullptr);
                        }),
                        "digest algorithm sha1 is not SHA-256");
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) {
                          ASN1_OCTET_STRING* junk = ASN1_OCTET_STRING_new();
                          X509_ALGOR_set0(Info(p7)->digest_alg, OBJ_nid2obj(NID_sha256),
                                          V_ASN1_OCTET_STRING, junk);
                        }),
                        "digest algorithm parameters are neither absent nor NULL");
  ExpectEnvelopeRefused(Variant([](PKCS7* p7) {
                          X509_ALGOR* extra = X509_ALGOR_new();
                          X509_ALGOR_set0(extra, OBJ_nid2obj(NID_sha384), V_ASN1_UNDEF, nullptr);
                          sk_X509_ALGOR_push(p7->d.sign->md_algs, extra);
                        }),
                        "digestAlgorithms is not exactly the signer's digest");
  ExpectEnvelopeRefused(Variant([](PKCS7* p7) {
                          X509_ALGOR_set0(sk_X509_ALGOR_value(p7->d.sign->md_algs, 0),
                                          OBJ_nid2obj(NID_sha512), V_ASN1_UNDEF, nullptr);
                        }),
                        "digestAlgorithms is not exactly the signer's digest");
}

TEST_P(EnvelopeVariantTest, SignatureAlgorithmVariantsAreRefused) {
  // The test signer is ECDSA P-256 over SHA-256.
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) {
                          X509_ALGOR_set0(Info(p7)->digest_enc_alg,
                                          OBJ_nid2obj(NID_ecdsa_with_SHA384), V_ASN1_UNDEF,
                                          nullptr);
                        }),
                        "does not use the SignerInfo's digest");
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) {
                          X509_ALGOR_set0(Info(p7)->digest_enc_alg, OBJ_nid2obj(NID_rsaEncryption),
                                          V_ASN1_NULL, nullptr);
                        }),
                        "does not fit the signer's key");
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) {
                          X509_ALGOR_set0(Info(p7)->digest_enc_alg, OBJ_txt2obj("1.2.3.4.5", 1),
                                          V_ASN1_UNDEF, nullptr);
                        }),
                        "signature algorithm 1.2.3.4.5 does not fit the signer's key");
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) {
                          ASN1_INTEGER* junk = ASN1_INTEGER_new();
                          ASN1_INTEGER_set(junk, 7);
                          X509_ALGOR_set0(Info(p7)->digest_enc_alg,
                                          OBJ_nid2obj(NID_ecdsa_with_SHA256), V_ASN1_INTEGER, junk);
                        }),
                        "signature algorithm parameters are neither absent nor NULL");
}

// OpenSSL finds the signer by a canonical name comparison, so "TEST-IMDS-ROOT" would match
// "test-imds-root".
TEST_P(EnvelopeVariantTest, IssuerNameSpelledDifferentlyIsRefused) {
  ExpectEnvelopeRefused(Variant([this](PKCS7* p7) {
                          X509_NAME* name = X509_NAME_new();
                          X509_NAME_add_entry_by_txt(
                              name, "CN", MBSTRING_ASC,
                              reinterpret_cast<const unsigned char*>("TEST-IMDS-ROOT"), -1, -1, 0);
                          X509_NAME_set(&Info(p7)->issuer_and_serial->issuer, name);
                          X509_NAME_free(name);
                        }),
                        "SignerInfo names its issuer unlike the signer's certificate");
}

// BER allows a length in more bytes than it needs; DER does not, and OpenSSL's decoder
// accepts both.
TEST_P(EnvelopeVariantTest, LongerLengthEncodingIsRefused) {
  std::string der = DerOf(Sign(Fields()));
  ASSERT_EQ(static_cast<unsigned char>(der[1]), 0x82);  // SEQUENCE, length in 2 bytes
  std::string padded = der.substr(0, 1) + std::string("\x83\x00", 2) + der.substr(2);
  ExpectEnvelopeRefused(Reencode(padded), "is not in DER's single encoding");
}

INSTANTIATE_TEST_SUITE_P(SignerCache, EnvelopeVariantTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& param) {
                           return param.param ? "Warm" : "Cold";
                         });

TEST_F(IdentityTest, Pkcs7ThatIsNotSignedDataIsMalformed) {
  ossl::Pkcs7Ptr p7(PKCS7_new());
  ASSERT_EQ(PKCS7_set_type(p7.get(), NID_pkcs7_data), 1);
  ASSERT_EQ(ASN1_OCTET_STRING_set(p7->d.data, reinterpret_cast<const unsigned char*>("{}"), 2), 1);
  ExpectRefused(PkcsToToken(p7.get()), IdentityFailure::kMalformed);
}

TEST_F(IdentityTest, DetachedSignedDataIsMalformed) {
  std::string json = testsupport::AttestedDocumentJson(Fields());
  ossl::X509Ptr cert = ossl::ParseCertPem(signer_.cert_pem);
  ossl::PkeyPtr key = ossl::ParseKeyPem(signer_.key_pem);
  ossl::BioPtr in(BIO_new_mem_buf(json.data(), static_cast<int>(json.size())));
  ossl::Pkcs7Ptr p7(
      PKCS7_sign(cert.get(), key.get(), nullptr, in.get(), PKCS7_BINARY | PKCS7_DETACHED));
  ASSERT_NE(p7, nullptr);
  ExpectRefused(PkcsToToken(p7.get()), IdentityFailure::kMalformed);
}

TEST_F(IdentityTest, TwoSignersAreMalformed) {
  std::string json = testsupport::AttestedDocumentJson(Fields());
  CertAndKey second = IssueImdsSigner(root_);
  ossl::BioPtr in(BIO_new_mem_buf(json.data(), static_cast<int>(json.size())));
  ossl::Pkcs7Ptr p7(
      PKCS7_sign(nullptr, nullptr, nullptr, nullptr, PKCS7_BINARY | PKCS7_PARTIAL | PKCS7_STREAM));
  ASSERT_NE(p7, nullptr);
  for (const CertAndKey* s : {&signer_, &second}) {
    ossl::X509Ptr cert = ossl::ParseCertPem(s->cert_pem);
    ossl::PkeyPtr key = ossl::ParseKeyPem(s->key_pem);
    ASSERT_NE(PKCS7_sign_add_signer(p7.get(), cert.get(), key.get(), nullptr, 0), nullptr);
  }
  ASSERT_EQ(PKCS7_final(p7.get(), in.get(), PKCS7_BINARY), 1);
  ExpectRefused(PkcsToToken(p7.get()), IdentityFailure::kMalformed);
}

TEST_F(IdentityTest, ContentThatIsNotAJsonObjectIsBadContent) {
  ExpectRefused(testsupport::SignAttestedContent("not json {", signer_),
                IdentityFailure::kBadContent);
  ExpectRefused(testsupport::SignAttestedContent("[1,2]", signer_), IdentityFailure::kBadContent);
  ExpectRefused(testsupport::SignAttestedContent("", signer_), IdentityFailure::kBadContent);
}

TEST_F(IdentityTest, MissingOrEmptyIdsAreBadContent) {
  nlohmann::json no_vm = Doc();
  no_vm.erase("vmId");
  ExpectRefused(SignJson(no_vm), IdentityFailure::kBadContent);
  nlohmann::json numeric_vm = Doc();
  numeric_vm["vmId"] = 42;
  ExpectRefused(SignJson(numeric_vm), IdentityFailure::kBadContent);
  nlohmann::json empty_sub = Doc();
  empty_sub["subscriptionId"] = "";
  ExpectRefused(SignJson(empty_sub), IdentityFailure::kBadContent);
}

TEST_F(IdentityTest, MissingOrMisshapenTimesAreBadContent) {
  nlohmann::json no_times = Doc();
  no_times.erase("timeStamp");
  ExpectRefused(SignJson(no_times), IdentityFailure::kBadContent);
  nlohmann::json iso = Doc();
  iso["timeStamp"]["expiresOn"] = "2030-01-01T00:00:00Z";
  ExpectRefused(SignJson(iso), IdentityFailure::kBadContent);
  nlohmann::json reversed = Doc();
  std::swap(reversed["timeStamp"]["createdOn"], reversed["timeStamp"]["expiresOn"]);
  ExpectRefused(SignJson(reversed), IdentityFailure::kBadContent);
}

TEST_F(IdentityTest, SkuIsOptional) {
  nlohmann::json no_sku = Doc();
  no_sku.erase("sku");
  AuthResult result = AuthenticateAndAdmit(*auth_, SignJson(no_sku));
  ASSERT_TRUE(result.ok()) << result.error.ToString();
  EXPECT_EQ(result.identity.sku, "");
}

// A refusal is never an identity-cache entry; it is repeated from the refusal cache for its
// ttl (the same reason and message, no other check), then checked again.
TEST_F(IdentityTest, RefusalsAreRepeatedForAWhileAndNeverCachedAsIdentities) {
  nlohmann::json no_vm = Doc();
  no_vm.erase("vmId");
  std::string token = SignJson(no_vm);
  AuthResult first = ExpectRefused(token, IdentityFailure::kBadContent);
  AuthResult again = ExpectRefused(token, IdentityFailure::kBadContent);
  EXPECT_EQ(again.error.message(), first.error.message());
  EXPECT_EQ(auth_->stats().verifications, 1u);
  EXPECT_EQ(auth_->stats().refusal_cache_hits, 1u);
  EXPECT_EQ(auth_->stats().cache_hits, 0u);
  EXPECT_EQ(auth_->stats().cache_entries, 0u);
  now_ = now_.load() + seconds(61);
  ExpectRefused(token, IdentityFailure::kBadContent);
  EXPECT_EQ(auth_->stats().verifications, 2u);

  AttestedDocumentOptions options = Options();
  options.refusal_cache_slots = 0;
  auth_ = Make(options);
  ExpectRefused(token, IdentityFailure::kBadContent);
  ExpectRefused(token, IdentityFailure::kBadContent);
  EXPECT_EQ(auth_->stats().verifications, 2u);
}

// The table's memory is fixed: more refused tokens than slots replace each other, and a good
// token is never answered from it.
TEST_F(IdentityTest, TheRefusalCacheIsBoundedAndNeverRefusesAGoodToken) {
  AttestedDocumentOptions options = Options();
  options.refusal_cache_slots = 4;
  auth_ = Make(options);
  for (int i = 0; i < 100; ++i) {
    ExpectRefused("not-base64-" + std::to_string(i) + "!", IdentityFailure::kMalformed);
  }
  EXPECT_EQ(auth_->stats().verifications, 100u);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields("vm-good"))).ok());
}

TEST_F(IdentityTest, FullCacheEvictsTheOldest) {
  AttestedDocumentOptions options = Options();
  options.cache_entries = 2;
  auth_ = Make(options);
  std::string a = Sign(Fields("vm-a")), b = Sign(Fields("vm-b")), c = Sign(Fields("vm-c"));
  for (const std::string* token : {&a, &b, &c})
    ASSERT_TRUE(AuthenticateAndAdmit(*auth_, *token).ok());
  EXPECT_EQ(auth_->stats().cache_entries, 2u);
  EXPECT_EQ(auth_->stats().cache_evictions, 1u);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, c).ok());  // kept
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, b).ok());  // kept
  EXPECT_EQ(auth_->stats().verifications, 3u);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, a).ok());  // was evicted: verified again
  EXPECT_EQ(auth_->stats().verifications, 4u);
}

TEST_F(IdentityTest, FullCacheEvictsExpiredBeforeOldest) {
  AttestedDocumentOptions options = Options();
  options.cache_entries = 2;
  options.max_token_age = seconds(0);  // the hour below would make every document too old
  auth_ = Make(options);
  std::string long_lived = Sign(Fields("vm-long"));
  AttestedDocumentFields short_fields = Fields("vm-short");
  short_fields.expires_on = now_.load() + minutes(30);
  std::string short_lived = Sign(short_fields);
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, long_lived).ok());
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, short_lived).ok());

  now_ = now_.load() + hours(1);
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields("vm-new"))).ok());
  EXPECT_EQ(auth_->stats().verifications, 3u);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, long_lived).ok());  // the older entry stayed
  EXPECT_EQ(auth_->stats().verifications, 3u);
  ExpectRefused(short_lived, IdentityFailure::kExpired);  // gone, so verified again
  EXPECT_EQ(auth_->stats().verifications, 4u);
}

// A replay: signed by the trusted signer two hours ago and valid four more, refused as too
// old; the same document within the age limit, or with no limit, is an identity.
TEST_F(IdentityTest, ADocumentOlderThanTheMaxTokenAgeIsRefused) {
  AttestedDocumentFields fields = Fields("vm-old");
  fields.created_on = WholeSeconds(now_.load() - hours(2));
  fields.expires_on = fields.created_on + hours(6);
  const std::string old_token = Sign(fields);
  AuthResult r = ExpectRefused(old_token, IdentityFailure::kExpired);
  EXPECT_THAT(r.error.message(), HasSubstr("--max-token-age"));

  AttestedDocumentOptions options = Options();
  options.max_token_age = seconds(0);
  auth_ = Make(options);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, old_token).ok());
}

TEST_F(IdentityTest, ACachedDocumentIsRefusedOnceItIsTooOld) {
  const std::string token = Sign(Fields("vm-aging"));
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, token).ok());
  now_ = now_.load() + minutes(9);
  EXPECT_TRUE(AuthenticateAndAdmit(*auth_, token).ok());
  EXPECT_EQ(auth_->stats().verifications, 1u);  // from the cache
  now_ = now_.load() + minutes(2);
  ExpectRefused(token, IdentityFailure::kExpired);
}

TEST_F(IdentityTest, ConcurrentCallersAgree) {
  std::vector<std::string> tokens;
  for (int i = 0; i < 4; ++i) tokens.push_back(Sign(Fields("vm-" + std::to_string(i))));
  constexpr int kThreads = 8, kCalls = 40;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        size_t which = static_cast<size_t>(t + i) % tokens.size();
        AuthResult result = AuthenticateAndAdmit(*auth_, tokens[which]);
        if (!result.ok() || result.identity.vm_id != "vm-" + std::to_string(which)) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  AuthenticatorStats stats = auth_->stats();
  EXPECT_EQ(stats.verifications + stats.cache_hits, uint64_t{kThreads * kCalls});
  EXPECT_GE(stats.verifications, tokens.size());
  EXPECT_EQ(stats.cache_entries, tokens.size());
}

// ---- Signer cache ----------------------------------------------------------------------

// The kept certificates against the full check: `reference` keeps no signer, trusted or
// refused (signer_cache_entries and signer_refusal_slots 0), `warm` holds signer_ (verified
// once at construction).
class SignerCacheTest : public IdentityTest {
 protected:
  // How the warm authenticator answered.
  enum class Path { kFullCheck, kKeptSigner, kRefusedSigner };

  SignerCacheTest() {
    AttestedDocumentOptions full = Options();
    full.signer_cache_entries = 0;
    full.signer_refusal_slots = 0;
    reference_ = Make(full);
    EXPECT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields("vm-warm"))).ok());
    EXPECT_EQ(auth_->stats().signer_cache_entries, 1u);
    EXPECT_EQ(auth_->stats().signer_cache_hits, 0u);
  }

  // `token` refused for `failure` by the full check and by the warm authenticator, with the
  // same message; `path` says which way the warm one took.
  void ExpectRefusedAsByTheFullCheck(const std::string& token, IdentityFailure failure, Path path) {
    AuthResult full = reference_->Authenticate(token);
    const AuthenticatorStats before = auth_->stats();
    AuthResult warm = ExpectRefused(token, failure);
    EXPECT_FALSE(full.ok());
    EXPECT_EQ(IdentityFailureName(full.failure), std::string(IdentityFailureName(failure)))
        << full.error.ToString();
    EXPECT_EQ(warm.error.ToString(), full.error.ToString());
    const AuthenticatorStats after = auth_->stats();
    EXPECT_EQ(after.verifications, before.verifications + 1);
    EXPECT_EQ(after.signer_cache_hits, before.signer_cache_hits + (path == Path::kKeptSigner));
    EXPECT_EQ(after.signer_refusal_cache_hits,
              before.signer_refusal_cache_hits + (path == Path::kRefusedSigner));
    EXPECT_EQ(reference_->stats().signer_cache_hits, 0u);
    EXPECT_EQ(reference_->stats().signer_refusal_cache_hits, 0u);
  }

  std::string SignerDer() const {
    ossl::X509Ptr cert = ossl::ParseCertPem(signer_.cert_pem);
    unsigned char* der = nullptr;
    int n = i2d_X509(cert.get(), &der);
    std::string out(reinterpret_cast<const char*>(der), n > 0 ? static_cast<size_t>(n) : 0);
    OPENSSL_free(der);
    return out;
  }

  std::unique_ptr<Authenticator> reference_;
};

TEST_F(SignerCacheTest, DistinctDocumentsFromOneSignerSkipTheCertificate) {
  for (const char* vm : {"vm-a", "vm-b", "vm-c"}) {
    AttestedDocumentFields fields = Fields(vm);
    AuthResult result = AuthenticateAndAdmit(*auth_, Sign(fields));
    ASSERT_TRUE(result.ok()) << result.error.ToString();
    EXPECT_EQ(result.identity.vm_id, vm);
    EXPECT_EQ(result.identity.subscription_id, "sub-1");
    EXPECT_EQ(result.identity.sku, "aks-ubuntu");
    EXPECT_EQ(result.identity.expires_at, WholeSeconds(fields.expires_on));
  }
  AuthenticatorStats stats = auth_->stats();
  EXPECT_EQ(stats.verifications, 4u);  // the warming document and the three
  EXPECT_EQ(stats.signer_cache_hits, 3u);
  EXPECT_EQ(stats.signer_cache_entries, 1u);
  EXPECT_EQ(stats.cache_entries, 4u);
  // The same document again is the identity cache's, before any signer work.
  std::string token = Sign(Fields("vm-d"));
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, token).ok());
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, token).ok());
  EXPECT_EQ(auth_->stats().signer_cache_hits, 4u);
  EXPECT_EQ(auth_->stats().cache_hits, 1u);
}

TEST_F(SignerCacheTest, RsaSignerIsCachedToo) {
  signer_ = IssueImdsSigner(root_, "metadata.azure.com", testsupport::KeyType::kRsa2048);
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields("vm-1"))).ok());
  AuthResult second = AuthenticateAndAdmit(*auth_, Sign(Fields("vm-2")));
  ASSERT_TRUE(second.ok()) << second.error.ToString();
  EXPECT_EQ(second.identity.vm_id, "vm-2");
  EXPECT_EQ(auth_->stats().signer_cache_hits, 1u);
  EXPECT_EQ(auth_->stats().signer_cache_entries, 2u);
}

TEST_F(SignerCacheTest, ContentAndTimeRefusalsAreTheFullChecks) {
  AttestedDocumentFields expired = Fields();
  expired.created_on = now_.load() - hours(7);
  expired.expires_on = now_.load() - minutes(1);
  ExpectRefusedAsByTheFullCheck(Sign(expired), IdentityFailure::kExpired, Path::kKeptSigner);
  AttestedDocumentFields ahead = Fields();
  ahead.created_on = now_.load() + minutes(6);
  ahead.expires_on = ahead.created_on + hours(6);
  ExpectRefusedAsByTheFullCheck(Sign(ahead), IdentityFailure::kExpired, Path::kKeptSigner);
  nlohmann::json no_vm = Doc();
  no_vm.erase("vmId");
  ExpectRefusedAsByTheFullCheck(SignJson(no_vm), IdentityFailure::kBadContent, Path::kKeptSigner);
  ExpectRefusedAsByTheFullCheck(testsupport::SignAttestedContent("", signer_),
                                IdentityFailure::kBadContent, Path::kKeptSigner);
}

TEST_F(SignerCacheTest, FlippedSignatureOrContentIsUntrusted) {
  std::string der = DerOf(Sign(Fields("vm-aaaa")));
  std::string signature = der;
  signature.back() = static_cast<char>(signature.back() ^ 0x01);  // the SignerInfo's signature
  ExpectRefusedAsByTheFullCheck(Reencode(signature), IdentityFailure::kUntrustedSigner,
                                Path::kKeptSigner);

  std::string content = der;
  size_t at = content.find("vm-aaaa");
  ASSERT_NE(at, std::string::npos);
  content[at + 3] = 'b';
  ExpectRefusedAsByTheFullCheck(Reencode(content), IdentityFailure::kUntrustedSigner,
                                Path::kKeptSigner);

  // The signed attributes (signing time among them) lie between the SignerInfo's issuer and
  // its signature: flip a byte of the signing time's digits.
  std::string attributes = der;
  size_t utc = attributes.rfind(std::string("\x17\x0d", 2));  // UTCTime, 13 bytes
  ASSERT_NE(utc, std::string::npos);
  attributes[utc + 2 + 11] = attributes[utc + 2 + 11] == '0' ? '1' : '0';  // seconds digit
  ExpectRefusedAsByTheFullCheck(Reencode(attributes), IdentityFailure::kUntrustedSigner,
                                Path::kKeptSigner);
}

TEST_F(SignerCacheTest, SignerInfoIssuerChangedIsMalformed) {
  std::string der = DerOf(Sign(Fields()));
  ossl::X509Ptr cert = ossl::ParseCertPem(signer_.cert_pem);
  const unsigned char* name = nullptr;
  size_t name_len = 0;
  ASSERT_EQ(X509_NAME_get0_der(X509_get_issuer_name(cert.get()), &name, &name_len), 1);
  size_t at = der.rfind(std::string(reinterpret_cast<const char*>(name), name_len));
  ASSERT_NE(at, std::string::npos);
  ASSERT_GT(at, der.find(SignerDer()));  // the SignerInfo's copy, after the certificate
  std::string cased = der;
  size_t t = cased.find("test-imds-root", at);
  ASSERT_NE(t, std::string::npos);
  cased[t] = 'T';  // the same name to OpenSSL's canonical lookup, not byte for byte
  ExpectRefusedAsByTheFullCheck(Reencode(cased), IdentityFailure::kMalformed, Path::kFullCheck);
  std::string other = der;
  other[t] = 'x';  // no certificate of the document is named so
  ExpectRefusedAsByTheFullCheck(Reencode(other), IdentityFailure::kMalformed, Path::kFullCheck);
}

TEST_F(SignerCacheTest, CertificateOneByteOffTheCachedOneIsNotTaken) {
  std::string der = DerOf(Sign(Fields()));
  std::string cert = SignerDer();
  size_t at = der.find(cert);
  ASSERT_NE(at, std::string::npos);
  std::string signature = der;  // the certificate's own signature, its last byte
  signature[at + cert.size() - 1] = static_cast<char>(signature[at + cert.size() - 1] ^ 0x01);
  ExpectRefusedAsByTheFullCheck(Reencode(signature), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  std::string subject = der;
  size_t cn = subject.find("metadata.azure.com", at);
  ASSERT_LT(cn, at + cert.size());
  subject[cn] = 'M';
  ExpectRefusedAsByTheFullCheck(Reencode(subject), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  EXPECT_EQ(auth_->stats().signer_cache_entries, 1u);
}

TEST_F(SignerCacheTest, ForeignOrMisnamedSignersAreRefusedAndNotCached) {
  CertAndKey genuine = signer_;
  TestCa other = TestCa::Create("test-imds-root");  // same name, different key
  signer_ = IssueImdsSigner(other);
  ExpectRefusedAsByTheFullCheck(Sign(Fields()), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Sign(Fields()), IdentityFailure::kUntrustedSigner,
                                Path::kRefusedSigner);
  signer_ = IssueImdsSigner(root_, "metadata.azure.com.evil.example");
  ExpectRefusedAsByTheFullCheck(Sign(Fields()), IdentityFailure::kWrongSigner, Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Sign(Fields()), IdentityFailure::kWrongSigner, Path::kFullCheck);
  EXPECT_EQ(auth_->stats().signer_cache_entries, 1u);
  // A document signed by another key, carrying the cached certificate in place of its own
  // signer's and naming it in the SignerInfo: the envelope is IMDS's, the signature does not
  // verify with the cached key.
  std::string forged = DerOf(Sign(Fields()));
  signer_ = genuine;
  const auto* p = reinterpret_cast<const unsigned char*>(forged.data());
  ossl::Pkcs7Ptr p7(d2i_PKCS7(nullptr, &p, static_cast<long>(forged.size())));
  ASSERT_NE(p7, nullptr);
  ossl::X509Ptr cached = ossl::ParseCertPem(signer_.cert_pem);
  sk_X509_pop_free(p7->d.sign->cert, X509_free);
  p7->d.sign->cert = nullptr;
  ASSERT_EQ(PKCS7_add_certificate(p7.get(), cached.get()), 1);
  // The SignerInfo still names the misnamed signer: no embedded certificate matches.
  ExpectRefusedAsByTheFullCheck(PkcsToToken(p7.get()), IdentityFailure::kMalformed,
                                Path::kFullCheck);
  PKCS7_ISSUER_AND_SERIAL* named =
      sk_PKCS7_SIGNER_INFO_value(PKCS7_get_signer_info(p7.get()), 0)->issuer_and_serial;
  ASN1_INTEGER_free(named->serial);
  named->serial = ASN1_INTEGER_dup(X509_get0_serialNumber(cached.get()));
  ExpectRefusedAsByTheFullCheck(PkcsToToken(p7.get()), IdentityFailure::kUntrustedSigner,
                                Path::kKeptSigner);
}

// ---- Refused signers ---------------------------------------------------------------------

// An attacker's own CA, named as ours: each document distinct, as a flood of minted documents
// would be; after the first, each is refused for its envelope's parse, as the full check would.
TEST_F(SignerCacheTest, DistinctDocumentsOfARefusedSignerAreRefusedAsByTheFullCheck) {
  TestCa other = TestCa::Create("test-imds-root");
  signer_ = IssueImdsSigner(other);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-0")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  for (const char* vm : {"vm-1", "vm-2", "vm-3"}) {
    ExpectRefusedAsByTheFullCheck(Sign(Fields(vm)), IdentityFailure::kUntrustedSigner,
                                  Path::kRefusedSigner);
  }
  EXPECT_THAT(reference_->Authenticate(Sign(Fields())).error.message(),
              HasSubstr("unable to get local issuer certificate"));
  // Kept for the refusal ttl, then checked in full again (and kept again).
  now_ = now_.load() + seconds(61);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-4")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-5")), IdentityFailure::kUntrustedSigner,
                                Path::kRefusedSigner);
  EXPECT_EQ(auth_->stats().signer_cache_entries, 1u);  // the warm one only

  AttestedDocumentOptions off = Options();
  off.signer_refusal_slots = 0;
  auth_ = Make(off);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-6")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-7")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
}

// Threads refusing distinct documents of one foreign signer while it is kept and replaced:
// every answer the full check's.
TEST_F(SignerCacheTest, ConcurrentRefusalsAgree) {
  constexpr int kThreads = 6, kCalls = 10;
  TestCa other = TestCa::Create("test-imds-root");
  signer_ = IssueImdsSigner(other);
  const std::string expected = reference_->Authenticate(Sign(Fields())).error.ToString();
  std::vector<std::vector<std::string>> tokens(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCalls; ++i) {
      tokens[t].push_back(Sign(Fields("vm-" + std::to_string(t) + "-" + std::to_string(i))));
    }
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (const std::string& token : tokens[t]) {
        AuthResult result = AuthenticateAndAdmit(*auth_, token);
        if (result.failure != IdentityFailure::kUntrustedSigner ||
            result.error.ToString() != expected) {
          ++wrong;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  // Every thread's first call may have raced to the full check; the rest were kept refusals.
  EXPECT_GE(auth_->stats().signer_refusal_cache_hits, uint64_t{kThreads * (kCalls - 1)});
}

// A bad signature says nothing of the certificate: a trusted signer's document with its
// signature broken is refused in full and never makes the signer's next document refused.
TEST_F(SignerCacheTest, ABadSignatureNeverRefusesItsCertificate) {
  signer_ = IssueImdsSigner(root_);  // trusted, not yet kept
  std::string der = DerOf(Sign(Fields("vm-1")));
  der.back() = static_cast<char>(der.back() ^ 0x01);  // the SignerInfo's signature
  ExpectRefusedAsByTheFullCheck(Reencode(der), IdentityFailure::kUntrustedSigner, Path::kFullCheck);
  AuthResult next = AuthenticateAndAdmit(*auth_, Sign(Fields("vm-2")));
  ASSERT_TRUE(next.ok()) << next.error.ToString();
  EXPECT_EQ(auth_->stats().signer_refusal_cache_hits, 0u);
  EXPECT_EQ(auth_->stats().signer_cache_entries, 2u);
}

// Time makes a certificate that is not yet valid valid: its refusal is never kept. Misnamed
// signers (a chain that verifies) are refused in full each time too.
TEST_F(SignerCacheTest, RefusalsTimeOrANameDecideAreNotKept) {
  LeafOptions leaf = ImdsSignerLeaf();
  leaf.not_before = std::chrono::hours(1);
  signer_ = root_.IssueLeaf(leaf);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-1")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-2")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  EXPECT_THAT(reference_->Authenticate(Sign(Fields())).error.message(), HasSubstr("not yet valid"));
  signer_ = IssueImdsSigner(root_, "imds.example");
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-3")), IdentityFailure::kWrongSigner,
                                Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-4")), IdentityFailure::kWrongSigner,
                                Path::kFullCheck);
}

// A refused certificate over 8 KiB is not kept (the table's memory would be the attacker's
// choice): each of its documents is checked in full.
TEST_F(SignerCacheTest, ALargeRefusedCertificateIsNotKept) {
  TestCa other = TestCa::Create("test-imds-root");
  LeafOptions leaf = ImdsSignerLeaf();
  for (int i = 0; i < 500; ++i) leaf.dns_names.push_back("n" + std::to_string(i) + ".example.com");
  signer_ = other.IssueLeaf(leaf);
  ossl::X509Ptr cert = ossl::ParseCertPem(signer_.cert_pem);
  ASSERT_GT(i2d_X509(cert.get(), nullptr), 8 * 1024);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-1")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-2")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
}

// A document embedding a refused certificate but whose envelope the full check refuses
// otherwise gets the full check's own answer (here: its SignerInfo names another issuer).
TEST_F(SignerCacheTest, AnEnvelopeAroundARefusedCertificateIsStillChecked) {
  TestCa other = TestCa::Create("test-imds-root");
  signer_ = IssueImdsSigner(other);
  ExpectRefusedAsByTheFullCheck(Sign(Fields("vm-1")), IdentityFailure::kUntrustedSigner,
                                Path::kFullCheck);
  std::string der = DerOf(Sign(Fields("vm-2")));
  size_t t = der.rfind("test-imds-root");
  ASSERT_NE(t, std::string::npos);
  ASSERT_GT(t, der.find("metadata.azure.com"));  // the SignerInfo's copy, after the certificate
  der[t] = 'x';
  ExpectRefusedAsByTheFullCheck(Reencode(der), IdentityFailure::kMalformed, Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Reencode(DerOf(Sign(Fields("vm-3"))) + std::string(1, '\0')),
                                IdentityFailure::kMalformed, Path::kFullCheck);
}

// More refused certificates than slots replace each other; the answers stay the full check's.
TEST_F(SignerCacheTest, RefusedSignersAreBounded) {
  AttestedDocumentOptions options = Options();
  options.signer_refusal_slots = 2;
  auth_ = Make(options);
  std::vector<CertAndKey> foreign;
  std::vector<TestCa> cas;
  for (int i = 0; i < 6; ++i) {
    cas.push_back(TestCa::Create("test-imds-root"));
    foreign.push_back(IssueImdsSigner(cas.back()));
  }
  for (int round = 0; round < 2; ++round) {
    for (const CertAndKey& who : foreign) {
      signer_ = who;
      AuthResult full = reference_->Authenticate(Sign(Fields()));
      AuthResult warm = AuthenticateAndAdmit(*auth_, Sign(Fields()));
      EXPECT_EQ(warm.failure, IdentityFailure::kUntrustedSigner);
      EXPECT_EQ(warm.error.ToString(), full.error.ToString());
    }
  }
  EXPECT_LE(auth_->stats().signer_refusal_cache_hits, 2u);  // at most the two slots' last
}

TEST_F(SignerCacheTest, LayoutsTheShortcutDoesNotTakeGoToTheFullCheck) {
  std::string der = DerOf(Sign(Fields()));
  ExpectRefusedAsByTheFullCheck(Reencode(der + std::string(1, '\0')), IdentityFailure::kMalformed,
                                Path::kFullCheck);
  ExpectRefusedAsByTheFullCheck(Reencode(der.substr(0, der.size() - 1)),
                                IdentityFailure::kMalformed, Path::kFullCheck);
  ASSERT_EQ(static_cast<unsigned char>(der[1]), 0x82);
  std::string padded = der.substr(0, 1) + std::string("\x83\x00", 2) + der.substr(2);
  ExpectRefusedAsByTheFullCheck(Reencode(padded), IdentityFailure::kMalformed, Path::kFullCheck);
  // Indefinite length on the outer SEQUENCE: BER, which d2i_PKCS7 reads but is not DER.
  std::string indefinite =
      der.substr(0, 1) + std::string("\x80", 1) + der.substr(4) + std::string("\0\0", 2);
  ExpectRefusedAsByTheFullCheck(Reencode(indefinite), IdentityFailure::kMalformed,
                                Path::kFullCheck);
}

TEST_F(SignerCacheTest, SecondCertificateGoesToTheFullCheck) {
  // A genuine signer with an extra certificate embedded: the full check's answer, whatever it
  // is, and no shortcut.
  std::string json = testsupport::AttestedDocumentJson(Fields());
  ossl::X509Ptr cert = ossl::ParseCertPem(signer_.cert_pem);
  ossl::PkeyPtr key = ossl::ParseKeyPem(signer_.key_pem);
  ossl::X509Ptr extra = ossl::ParseCertPem(root_.cert_pem());
  STACK_OF(X509)* extras = sk_X509_new_null();
  ASSERT_EQ(sk_X509_push(extras, extra.get()), 1);
  ossl::BioPtr in(BIO_new_mem_buf(json.data(), static_cast<int>(json.size())));
  ossl::Pkcs7Ptr p7(PKCS7_sign(cert.get(), key.get(), extras, in.get(), PKCS7_BINARY));
  sk_X509_free(extras);
  ASSERT_NE(p7, nullptr);
  std::string token = PkcsToToken(p7.get());
  AuthResult full = reference_->Authenticate(token);
  uint64_t hits = auth_->stats().signer_cache_hits;
  AuthResult warm = AuthenticateAndAdmit(*auth_, token);
  EXPECT_EQ(warm.ok(), full.ok()) << full.error.ToString() << " / " << warm.error.ToString();
  EXPECT_EQ(warm.failure, full.failure);
  EXPECT_EQ(warm.error.ToString(), full.error.ToString());
  EXPECT_EQ(auth_->stats().signer_cache_hits, hits);
  // PKCS7_sign without NOCERTS: its certificates alone.
  ossl::Pkcs7Ptr nocerts(
      PKCS7_sign(cert.get(), key.get(), nullptr,
                 ossl::BioPtr(BIO_new_mem_buf(json.data(), static_cast<int>(json.size()))).get(),
                 PKCS7_BINARY | PKCS7_NOCERTS));
  ASSERT_NE(nocerts, nullptr);
  ExpectRefusedAsByTheFullCheck(PkcsToToken(nocerts.get()), IdentityFailure::kMalformed,
                                Path::kFullCheck);
}

TEST_F(SignerCacheTest, SignerPastItsValidityGoesBackToTheFullCheck) {
  LeafOptions leaf = ImdsSignerLeaf();
  // notAfter is in whole seconds: between 3 and 4 s from `issued`, which leaves the first
  // verification 3 s on a loaded machine; 5 s after `issued` it has passed for certain.
  leaf.not_after = seconds(4);
  const auto issued = std::chrono::system_clock::now();
  signer_ = root_.IssueLeaf(leaf);
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, Sign(Fields("vm-1"))).ok());
  EXPECT_EQ(auth_->stats().signer_cache_entries, 2u);
  std::string later = Sign(Fields("vm-2"));
  std::this_thread::sleep_until(issued + seconds(5));
  ExpectRefusedAsByTheFullCheck(later, IdentityFailure::kUntrustedSigner, Path::kFullCheck);
  EXPECT_THAT(AuthenticateAndAdmit(*auth_, Sign(Fields("vm-3"))).error.message(),
              HasSubstr("certificate has expired"));
  EXPECT_EQ(auth_->stats().signer_cache_entries, 1u);       // dropped; the warm one stays
  EXPECT_EQ(auth_->stats().signer_refusal_cache_hits, 1u);  // vm-3: an expired one stays so
}

TEST_F(SignerCacheTest, BoundedLeastRecentlyUsedFirst) {
  AttestedDocumentOptions options = Options();
  options.signer_cache_entries = 2;
  auth_ = Make(options);
  CertAndKey a = IssueImdsSigner(root_), b = IssueImdsSigner(root_), c = IssueImdsSigner(root_);
  auto sign_with = [this](const CertAndKey& who, const std::string& vm) {
    return testsupport::SignAttestedContent(testsupport::AttestedDocumentJson(Fields(vm)), who);
  };
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, sign_with(a, "a1")).ok());
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, sign_with(b, "b1")).ok());
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, sign_with(a, "a2")).ok());  // a is now the most recent
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, sign_with(c, "c1")).ok());  // b goes
  EXPECT_EQ(auth_->stats().signer_cache_entries, 2u);
  EXPECT_EQ(auth_->stats().signer_cache_hits, 1u);
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, sign_with(a, "a3")).ok());
  EXPECT_EQ(auth_->stats().signer_cache_hits, 2u);
  ASSERT_TRUE(AuthenticateAndAdmit(*auth_, sign_with(b, "b2")).ok());  // verified in full again
  EXPECT_EQ(auth_->stats().signer_cache_hits, 2u);
}

TEST_F(SignerCacheTest, ConcurrentDistinctDocumentsAgree) {
  constexpr int kThreads = 8, kCalls = 15;
  std::vector<std::vector<std::string>> tokens(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCalls; ++i) {
      tokens[t].push_back(Sign(Fields("vm-" + std::to_string(t) + "-" + std::to_string(i))));
    }
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        AuthResult result = AuthenticateAndAdmit(*auth_, tokens[t][i]);
        if (!result.ok() ||
            result.identity.vm_id != "vm-" + std::to_string(t) + "-" + std::to_string(i)) {
          ++wrong;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(auth_->stats().signer_cache_hits, uint64_t{kThreads * kCalls});
}

TEST_F(SignerCacheTest, SplitOffCertificateFindsTheEmbeddedCertificate) {
  std::string der = DerOf(Sign(Fields()));
  std::optional<SplitSignedData> split = SplitOffCertificate(der);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->certificate, SignerDer());
  EXPECT_EQ(split->stripped.size(), der.size() - SignerDer().size() - 4);  // [0] 82 xx xx
  const auto* p = reinterpret_cast<const unsigned char*>(split->stripped.data());
  ossl::Pkcs7Ptr p7(d2i_PKCS7(nullptr, &p, static_cast<long>(split->stripped.size())));
  ASSERT_NE(p7, nullptr);
  EXPECT_EQ(p7->d.sign->cert, nullptr);  // absent, not an empty SET
  EXPECT_EQ(sk_PKCS7_SIGNER_INFO_num(PKCS7_get_signer_info(p7.get())), 1);

  EXPECT_FALSE(SplitOffCertificate(der + std::string(1, '\0')).has_value());
  EXPECT_FALSE(SplitOffCertificate(der.substr(0, der.size() - 1)).has_value());
  EXPECT_FALSE(SplitOffCertificate("").has_value());
  EXPECT_FALSE(SplitOffCertificate(std::string("\x30\x80\x00\x00", 4)).has_value());
  std::string padded = der.substr(0, 1) + std::string("\x83\x00", 2) + der.substr(2);
  EXPECT_FALSE(SplitOffCertificate(padded).has_value());
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

// Not a check: CPU per Authenticate (the identity step of a call) of distinct documents, good
// ones from one signer and refused ones from a foreign signer, each through the full check
// and through the kept certificate; and of one refused token repeated (the refusal cache).
// IDENTITY_BENCH_DOCS (default 200) documents each; meaningful in a Release build (bench:
// `service_identity_test --gtest_filter='*CpuPerDocument*'`, docs/BENCHMARKS.md).
TEST_F(SignerCacheTest, CpuPerDocument) {
  int n = 200;
  if (const char* env = std::getenv("IDENTITY_BENCH_DOCS")) n = std::max(1, std::atoi(env));
  TestCa other = TestCa::Create("test-imds-root");
  CertAndKey foreign = IssueImdsSigner(other);
  std::vector<std::string> good, refused;
  for (int i = 0; i < 2 * n; ++i) good.push_back(Sign(Fields("vm-" + std::to_string(i))));
  std::swap(signer_, foreign);
  for (int i = 0; i < 2 * n + 1; ++i) refused.push_back(Sign(Fields("vm-" + std::to_string(i))));
  std::swap(signer_, foreign);
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  };
  // Microseconds of CPU per call over tokens[from, from + n), each answered `ok` or not.
  auto run = [&](Authenticator& auth, const std::vector<std::string>& tokens, int from, bool ok) {
    double start = cpu_now();
    for (int i = from; i < from + n; ++i) {
      EXPECT_EQ(AuthenticateAndAdmit(auth, tokens[i]).ok(), ok);
    }
    return (cpu_now() - start) / n;
  };
  const double good_full = run(*reference_, good, 0, true);
  const double good_kept = run(*auth_, good, n, true);
  const double refused_full = run(*reference_, refused, 0, false);
  EXPECT_FALSE(AuthenticateAndAdmit(*auth_, refused[2 * n]).ok());  // its certificate kept
  const double refused_kept = run(*auth_, refused, n, false);
  EXPECT_EQ(auth_->stats().signer_refusal_cache_hits, static_cast<uint64_t>(n));
  // The token kept again (the refusal cache is a fixed table: the n refusals since may have
  // taken its slot), then every repeat answered from it, before any signer work.
  EXPECT_FALSE(AuthenticateAndAdmit(*auth_, refused[2 * n]).ok());
  const uint64_t signer_refusals = auth_->stats().signer_refusal_cache_hits;
  const std::vector<std::string> repeated(2 * n, refused[2 * n]);
  const double repeated_token = run(*auth_, repeated, n, false);
  std::printf(
      "[ bench    ] %d distinct documents each, us CPU per call: good: full check %.1f, kept "
      "signer %.1f; refused (foreign signer): full check %.1f, kept refusal %.1f; one refused "
      "token repeated %.1f\n",
      n, good_full, good_kept, refused_full, refused_kept, repeated_token);
  EXPECT_EQ(auth_->stats().signer_cache_hits, static_cast<uint64_t>(n));
  EXPECT_EQ(auth_->stats().signer_refusal_cache_hits, signer_refusals);
}

TEST(InsecureAuthenticatorTest, AcceptsAnyNonEmptyToken) {
  auto auth = NewInsecureAnyTokenAuthenticator();
  AuthResult result = auth->Authenticate("anything");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.identity.vm_id, "insecure");
  EXPECT_EQ(result.identity.subscription_id, "insecure");
  EXPECT_TRUE(result.identity.insecure);
  AuthResult empty = auth->Authenticate("");
  EXPECT_FALSE(empty.ok());
  EXPECT_EQ(empty.failure, IdentityFailure::kMissing);
}

TEST(VerifySignedDocumentTest, ReturnsContentAndSigner) {
  TestCa root = TestCa::Create("root");
  CertAndKey signer = IssueImdsSigner(root, "signer.example");
  std::string token = testsupport::SignAttestedContent(R"({"k":1})", signer);
  SignedDocument any_name = VerifySignedDocument(token, root.cert_pem(), "");
  ASSERT_TRUE(any_name.ok()) << any_name.error.ToString();
  EXPECT_EQ(any_name.content, R"({"k":1})");
  EXPECT_THAT(any_name.signer_subject, HasSubstr("CN=signer.example"));
  EXPECT_GT(any_name.signer_not_after, system_clock::now() + hours(23));

  SignedDocument wrong = VerifySignedDocument(token, root.cert_pem(), "metadata.azure.com");
  EXPECT_EQ(wrong.failure, IdentityFailure::kWrongSigner);
  SignedDocument untrusted = VerifySignedDocument(token, TestCa::Create().cert_pem(), "");
  EXPECT_EQ(untrusted.failure, IdentityFailure::kUntrustedSigner);
}

TEST(ImdsTimestampTest, ParsesImdsShape) {
  using namespace std::chrono;
  auto parsed = ParseImdsTimestamp("11/30/20 20:59:36 -0000");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, sys_days(2020y / November / 30) + hours(20) + minutes(59) + seconds(36));
  EXPECT_EQ(ParseImdsTimestamp("11/30/20 20:59:36 +0130"), *parsed - minutes(90));
  EXPECT_EQ(ParseImdsTimestamp("11/30/20 20:59:36 -0200"), *parsed + hours(2));
  EXPECT_EQ(ParseImdsTimestamp("02/29/24 00:00:00 -0000"), sys_days(2024y / February / 29));
}

TEST(ImdsTimestampTest, RefusesAnythingElse) {
  for (const char* bad :
       {"", "11/30/20 20:59:36", "11/30/20 20:59:36 -0000 ", "1/30/20 20:59:36 -0000",
        "11/30/20 20:59:36 0000", "11-30-20 20:59:36 -0000", "13/01/20 00:00:00 -0000",
        "02/30/24 00:00:00 -0000", "02/29/23 00:00:00 -0000", "11/30/20 24:00:00 -0000",
        "11/30/20 20:60:00 -0000", "11/30/20 20:59:60 -0000", "11/30/20 20:59:36 -2400",
        "11/30/20 2a:59:36 -0000", "2020-11-30T20:59:36Z"}) {
    EXPECT_FALSE(ParseImdsTimestamp(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace hotfix::service
