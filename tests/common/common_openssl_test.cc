#include "common/openssl.h"

#include <openssl/err.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

#include "common/text.h"
#include "test_ca_pem.h"

namespace hotfix::ossl {
namespace {

using ::hotfix::kLowerHexDigits;
using unittest::kCaOne;
using unittest::kCaTwo;

// A block whose base64 does not decode.
const char kBadBase64Block[] =
    "-----BEGIN CERTIFICATE-----\n!!!! not base64 !!!!\n-----END CERTIFICATE-----\n";
// A well-formed block of another type.
const char kKeyBlock[] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";

std::string CommonName(const X509Ptr& cert) {
  char name[64] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, name, sizeof name);
  return name;
}

TEST(ParsePemCertificatesTest, EveryCertificateInOrder) {
  auto certs = ParsePemCertificates(std::string(kCaOne) + kCaTwo);
  ASSERT_TRUE(certs.ok()) << certs.status().message();
  ASSERT_EQ(certs->size(), 2u);
  EXPECT_EQ(CommonName((*certs)[0]), "test-ca");
  EXPECT_EQ(CommonName((*certs)[1]), "test-ca-2");
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(ParsePemCertificatesTest, SkipsWhatGoSkips) {
  // Text between blocks, other block types and an undecodable block are passed over; the
  // certificates around them are kept.
  auto certs = ParsePemCertificates(std::string("a comment\n") + kKeyBlock + kCaOne +
                                    kBadBase64Block + "more text\n" + kCaTwo + "trailing");
  ASSERT_TRUE(certs.ok()) << certs.status().message();
  ASSERT_EQ(certs->size(), 2u);
  EXPECT_EQ(CommonName((*certs)[1]), "test-ca-2");
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(ParsePemCertificatesTest, SkipsBlocksWithHeaders) {
  std::string encrypted(kCaOne);
  encrypted.insert(encrypted.find('\n') + 1, "Proc-Type: 4,ENCRYPTED\n\n");
  EXPECT_FALSE(ParsePemCertificates(encrypted).ok());
}

TEST(ParsePemCertificatesTest, NoCertificateIsInvalidArgument) {
  for (std::string pem : {std::string(), std::string("this is not a certificate"),
                          std::string(kBadBase64Block), std::string(kKeyBlock)}) {
    auto certs = ParsePemCertificates(pem);
    ASSERT_FALSE(certs.ok()) << pem;
    EXPECT_EQ(certs.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(certs.status().message(), "no PEM certificate found");
    EXPECT_EQ(ERR_peek_error(), 0u);
  }
}

// The same vector given in pieces, and FIPS 180-2's two-block one split across the block edge.
TEST(Sha256Test, StreamedInPiecesGivesTheSameDigest) {
  Sha256Stream abc;
  abc.Update("a");
  abc.Update("");
  abc.Update("bc");
  EXPECT_EQ(abc.FinishHex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  Sha256Stream split;
  split.Update(two_blocks.substr(0, 31));
  split.Update(two_blocks.substr(31));
  EXPECT_EQ(split.FinishHex(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(split.FinishHex(), "") << "a finished stream has no second digest";
}

// FIPS 180-2's "abc" vector, both ways, and the digest a caller fetched once.
TEST(Sha256Test, TheStandardVector) {
  constexpr char kAbc[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  EXPECT_EQ(Sha256Hex("abc"), kAbc);
  MdPtr sha256(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  ASSERT_NE(sha256, nullptr);
  std::optional<Sha256Digest> digest = Sha256(sha256.get(), "abc");
  ASSERT_TRUE(digest.has_value());
  std::string hex;
  for (unsigned char b : *digest) {
    hex.push_back(kLowerHexDigits[b >> 4]);
    hex.push_back(kLowerHexDigits[b & 0xf]);
  }
  EXPECT_EQ(hex, kAbc);
}

TEST(DrainErrorsTest, FallbackOnlyWhenNothingIsQueued) {
  ERR_clear_error();
  EXPECT_EQ(DrainErrorsOr("nothing queued"), "nothing queued");
  ERR_raise_data(ERR_LIB_X509, X509_R_CERT_ALREADY_IN_HASH_TABLE, "detail");
  std::string drained = DrainErrorsOr("nothing queued");
  EXPECT_NE(drained, "nothing queued");
  EXPECT_NE(drained.find("(detail)"), std::string::npos) << drained;
  EXPECT_EQ(ERR_peek_error(), 0u);
  EXPECT_EQ(DrainErrors(), "");
}

}  // namespace
}  // namespace hotfix::ossl
