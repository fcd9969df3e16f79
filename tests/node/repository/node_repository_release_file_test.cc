#include "node/repository/release_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace hotfix::node::repository {
namespace {

// A real InRelease: apt-ftparchive's Release for a one-package repository, clear-signed by
// gpg --clearsign --digest-algo SHA256 (the shape packages.microsoft.com serves). kSignedText
// is what gpgv --output wrote for it.
constexpr char kSignedText[] =
    "Architectures: amd64 arm64 armhf\n"
    "Codename: jammy\n"
    "Components: main\n"
    "Date: Fri, 21 Aug 2026 18:04:11 UTC\n"
    "Label: microsoft-ubuntu-jammy-prod\n"
    "Origin: microsoft-ubuntu-jammy-prod\n"
    "Suite: jammy\n"
    "MD5Sum:\n"
    " 484087d146e102eec2629f604ff0772c              731 main/binary-amd64/Packages\n"
    " 0bc61cc307b867ccefc87860ac264e53              500 main/binary-amd64/Packages.gz\n"
    "SHA1:\n"
    " fd2afd3629b67d2e498ea783f13586551e2e97b5              731 main/binary-amd64/Packages\n"
    " 431fe3e2d380a0e6dde7e13abbdacd41fbd456f4              500 main/binary-amd64/Packages.gz\n"
    "SHA256:\n"
    " 433e43bef88326faacec8ea8e5c36f4936275b917fd627497c6093567cfaf3be              731 "
    "main/binary-amd64/Packages\n"
    " 14a1d1a657aba548d5828e92e4f02397f79082cb0a80f089ef4dd144613ef46a              500 "
    "main/binary-amd64/Packages.gz\n"
    "SHA512:\n"
    " 4c86f0a1721770ec855bb7425711a4d57d47f28f4a1465e7f5b7cdc8962d3a683d9e62ad8680d3052531c23bb9c4"
    "bb777c991bfda9d451ea07bb112e2c844235              731 main/binary-amd64/Packages\n"
    " e15f25d636a3c07b09e99e8ba0ecb3b11b6926b2da0c8eb1258fc374c6e744fb3bff83028b7c497c1e6430be8bdb"
    "f367a8c46111dd8d381aafea6e1441ca3fae              500 main/binary-amd64/Packages.gz\n";

constexpr char kHeader[] =
    "-----BEGIN PGP SIGNED MESSAGE-----\n"
    "Hash: SHA256\n"
    "\n";

constexpr char kSignature[] =
    "-----BEGIN PGP SIGNATURE-----\n"
    "\n"
    "iQEzBAEBCAAdFiEEXl4an/s/gKDeaRWakoaCDmVcn1sFAmsV0EIACgkQkoaCDmVc\n"
    "n1sfNwf/QYXpY+4IoEBkBUezb6Nm7Q7+7Bs2YHToUClJk1ow6zFkMf33hFIzSiv/\n"
    "q2Wu2l8W7va6pHbZqUGQm0kzTbCii3ofCpOx2XWp0aGYXSgXdG07JyQhWt02/BDZ\n"
    "M5z/mnCPQt80Qbp5a+8YJ08PS5C8mhA2j8+YtU4ci2VlRYJUC17k5o05Z9oZzOdS\n"
    "YxYE9akP3HQtltcoOAiSUQgM5ukY28zBJ2trWqUTU4ygN4m/pVqu7wr3a8Z4k5LT\n"
    "NZhDpWWQVmKfoUmS+Z0++kfpWm+8jIbDQqAPa06xATpzhxsQDXAlu44wOZ8r5gtc\n"
    "3wDQS/dVmi/DBopCh+yAcwqoiUAm/g==\n"
    "=7tFP\n"
    "-----END PGP SIGNATURE-----\n";

std::string RealInRelease() { return std::string(kHeader) + kSignedText + kSignature; }

std::string Crlf(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out.push_back('\r');
    out.push_back(c);
  }
  return out;
}

void ExpectMalformed(const std::string& file, const std::string& why) {
  Status s = CheckClearsignedLayout(file);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << file;
  EXPECT_EQ(s.message(), "malformed clear-signed InRelease: " + why) << file;
}

TEST(CheckClearsignedLayout, RealInRelease) {
  EXPECT_TRUE(CheckClearsignedLayout(RealInRelease()).ok());
  EXPECT_TRUE(CheckClearsignedLayout(Crlf(RealInRelease())).ok());
}

TEST(CheckClearsignedLayout, AcceptedVariations) {
  const std::string text = kSignedText;
  for (const std::string& file : {
           RealInRelease() + "\n\n \t\r\n",  // whitespace after the signature
           std::string("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\nHash: SHA512\n\n") +
               text + kSignature,
           std::string("-----BEGIN PGP SIGNED MESSAGE-----\n\n") + text + kSignature,
           std::string(kHeader) + "- -----dash-escaped line\n- --\n" + text + kSignature,
           std::string(kHeader) + kSignature,  // no text at all
           // GnuPG ignores whitespace after an armor line.
           std::string("-----BEGIN PGP SIGNED MESSAGE----- \nHash: SHA256\n\n") + text +
               "-----BEGIN PGP SIGNATURE-----\t\nVersion: GnuPG v2\n\nabc\n=x\n"
               "-----END PGP SIGNATURE-----  ",
       }) {
    EXPECT_TRUE(CheckClearsignedLayout(file).ok()) << file;
  }
}

TEST(CheckClearsignedLayout, MustStartAtByteZero) {
  const std::string why = "does not start with -----BEGIN PGP SIGNED MESSAGE-----";
  ExpectMalformed("", why);
  ExpectMalformed(" " + RealInRelease(), why);
  ExpectMalformed("\n" + RealInRelease(), why);
  ExpectMalformed("\xef\xbb\xbf" + RealInRelease(), why);
  ExpectMalformed("Origin: x\n" + RealInRelease(), why);
  ExpectMalformed(kSignedText, why);
  ExpectMalformed("-----BEGIN PGP SIGNED MESSAGE-----x\nHash: SHA256\n\n", why);
}

TEST(CheckClearsignedLayout, ArmorHeaders) {
  ExpectMalformed(
      std::string("-----BEGIN PGP SIGNED MESSAGE-----\nComment: x\n\n") + kSignedText + kSignature,
      "armor header on line 2 is not \"Hash: ...\"");
  ExpectMalformed(std::string("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\nHash:  \n\n") +
                      kSignedText + kSignature,
                  "armor header on line 3 is not \"Hash: ...\"");
  // A whitespace-only line is not the blank line that ends the headers.
  ExpectMalformed(std::string("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n \n") +
                      kSignedText + kSignature,
                  "armor header on line 3 is not \"Hash: ...\"");
  ExpectMalformed("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n",
                  "no blank line after the armor headers");
  ExpectMalformed("-----BEGIN PGP SIGNED MESSAGE-----", "no blank line after the armor headers");
}

TEST(CheckClearsignedLayout, SignedText) {
  ExpectMalformed(std::string(kHeader) + kSignedText, "no -----BEGIN PGP SIGNATURE----- line");
  ExpectMalformed(std::string(kHeader) + "Origin: x\n-unescaped\n" + kSignature,
                  "unescaped dash line on line 5 of the signed text");
  // A second message inside the first: gpgv would report on one of them.
  ExpectMalformed(std::string(kHeader) + "Origin: x\n" + RealInRelease(),
                  "unescaped dash line on line 5 of the signed text");
  ExpectMalformed(std::string(kHeader) + "-----END PGP SIGNATURE-----\n" + kSignature,
                  "unescaped dash line on line 4 of the signed text");
  ExpectMalformed(std::string(kHeader) + "-\n" + kSignature,
                  "unescaped dash line on line 4 of the signed text");
}

TEST(CheckClearsignedLayout, SignatureBlockAndTrailer) {
  ExpectMalformed(std::string(kHeader) + kSignedText + "-----BEGIN PGP SIGNATURE-----\n\nabc\n",
                  "no -----END PGP SIGNATURE----- line");
  ExpectMalformed(std::string(kHeader) + kSignedText +
                      "-----BEGIN PGP SIGNATURE-----\n\nabc\n-----BEGIN PGP SIGNATURE-----\n"
                      "-----END PGP SIGNATURE-----\n",
                  "unexpected armor line on line 26 of the signature");
  ExpectMalformed(RealInRelease() + RealInRelease(), "content after -----END PGP SIGNATURE-----");
  ExpectMalformed(RealInRelease() + "\nSHA256:\n", "content after -----END PGP SIGNATURE-----");
  ExpectMalformed(RealInRelease() + std::string(1, '\0'),
                  "content after -----END PGP SIGNATURE-----");
}

TEST(FindReleaseSha256, RealInReleaseEntries) {
  StatusOr<ReleaseEntry> gz = FindReleaseSha256(kSignedText, "main/binary-amd64/Packages.gz");
  ASSERT_TRUE(gz.ok()) << gz.status().message();
  EXPECT_EQ(gz->path, "main/binary-amd64/Packages.gz");
  EXPECT_EQ(gz->size, 500u);
  EXPECT_EQ(gz->sha256, "14a1d1a657aba548d5828e92e4f02397f79082cb0a80f089ef4dd144613ef46a");
  StatusOr<ReleaseEntry> plain = FindReleaseSha256(kSignedText, "main/binary-amd64/Packages");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->size, 731u);
  EXPECT_EQ(plain->sha256, "433e43bef88326faacec8ea8e5c36f4936275b917fd627497c6093567cfaf3be");

  StatusOr<ReleaseEntry> crlf = FindReleaseSha256(Crlf(kSignedText), "main/binary-amd64/Packages");
  ASSERT_TRUE(crlf.ok());
  EXPECT_EQ(crlf->sha256, plain->sha256);
}

void ExpectNoEntry(const std::string& text, const std::string& path) {
  StatusOr<ReleaseEntry> got = FindReleaseSha256(text, path);
  ASSERT_FALSE(got.ok()) << text;
  EXPECT_EQ(got.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(got.status().message(), "InRelease has no SHA256 entry for " + path);
}

TEST(FindReleaseSha256, PathMustMatchExactly) {
  for (const char* path : {"main/binary-arm64/Packages", "binary-amd64/Packages",
                           "main/binary-amd64/Packages.xz", "Packages", "", "main"}) {
    ExpectNoEntry(kSignedText, path);
  }
}

TEST(FindReleaseSha256, OnlyTheSha256Section) {
  // The path is listed under MD5Sum, SHA1 and SHA512 only.
  const std::string text =
      "MD5Sum:\n 484087d146e102eec2629f604ff0772c 731 p\n"
      "SHA1:\n fd2afd3629b67d2e498ea783f13586551e2e97b5 731 p\n"
      "SHA512:\n " +
      std::string(128, 'a') + " 731 p\n";
  ExpectNoEntry(text, "p");
  const std::string hash(64, 'b');
  // A non-indented line ends the section, a blank line too; "SHA256: " is not "SHA256:".
  ExpectNoEntry("SHA256:\nDate: x\n " + hash + " 1 p\n", "p");
  ExpectNoEntry("SHA256:\n\n " + hash + " 1 p\n", "p");
  ExpectNoEntry("SHA256: \n " + hash + " 1 p\n", "p");
  ExpectNoEntry("sha256:\n " + hash + " 1 p\n", "p");
  ExpectNoEntry(" SHA256:\n " + hash + " 1 p\n", "p");
  // A later SHA256 section is read.
  StatusOr<ReleaseEntry> got =
      FindReleaseSha256("SHA256:\n " + hash + " 1 q\nSHA512:\nSHA256:\n " + hash + " 2 p\n", "p");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 2u);
}

TEST(FindReleaseSha256, FieldsAreRunsOfSpacesAndTabs) {
  const std::string hash = "14A1D1A657ABA548D5828E92E4F02397F79082CB0A80F089EF4DD144613EF46A";
  StatusOr<ReleaseEntry> got =
      FindReleaseSha256("SHA256:\n\t" + hash + " \t 0\t\tdir/file \r\n", "dir/file");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->size, 0u);
  EXPECT_EQ(got->sha256, "14a1d1a657aba548d5828e92e4f02397f79082cb0a80f089ef4dd144613ef46a");
  // Lines of another field count are not entries; a later one is.
  got = FindReleaseSha256("SHA256:\n " + hash + " 5 p extra\n " + hash + " 6 p\n", "p");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 6u);
  ExpectNoEntry("SHA256:\n " + hash + " p\n", "p");
}

TEST(FindReleaseSha256, SizeIsAnUnsignedDecimalThatFitsUint64) {
  const std::string hash(64, 'c');
  StatusOr<ReleaseEntry> got = FindReleaseSha256("SHA256:\n " + hash + " 007 p\n", "p");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 7u);
  got = FindReleaseSha256("SHA256:\n " + hash + " 18446744073709551615 p\n", "p");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 18446744073709551615u);
  for (const char* size : {"-1", "+1", "1a", "0x10", "18446744073709551616", "1.0", "1e3"}) {
    ExpectNoEntry("SHA256:\n " + hash + " " + size + " p\n", "p");
  }
}

TEST(FindReleaseSha256, HashIsExactly64HexDigits) {
  for (const std::string& hash : {std::string(63, 'a'), std::string(65, 'a'),
                                  std::string(63, 'a') + "g", std::string(62, 'a') + "0x"}) {
    ExpectNoEntry("SHA256:\n " + hash + " 1 p\n", "p");
  }
}

TEST(FindReleaseSha256, TheFirstEntryForThePathDecides) {
  // A malformed first entry is not rescued by a valid one after it.
  const std::string good(64, 'd');
  ExpectNoEntry("SHA256:\n " + std::string(63, 'd') + " 1 p\n " + good + " 1 p\n", "p");
  ExpectNoEntry("SHA256:\n " + good + " -1 p\n " + good + " 1 p\n", "p");
  StatusOr<ReleaseEntry> got =
      FindReleaseSha256("SHA256:\n " + good + " 1 p\n " + std::string(64, 'e') + " 2 p\n", "p");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 1u);
}

TEST(FindReleaseSha256, MessageEscapesThePath) {
  StatusOr<ReleaseEntry> got = FindReleaseSha256("", "a\nb\"");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "InRelease has no SHA256 entry for a\\x0ab\\x22");
}

TEST(FindReleaseSha256, LargeTextIsOnePass) {
  // 64 MiB of SHA256 lines for other files before the one asked for.
  std::string text = "SHA256:\n";
  const std::string line = " " + std::string(64, 'f') + " 1 other/file\n";
  text.reserve(64 << 20);
  while (text.size() < (64 << 20) - 200) text += line;
  text += " " + std::string(64, 'A') + " 9 wanted\n";
  StatusOr<ReleaseEntry> got = FindReleaseSha256(text, "wanted");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->sha256, std::string(64, 'a'));
}

}  // namespace
}  // namespace hotfix::node::repository
