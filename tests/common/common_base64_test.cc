#include "common/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace hotfix {
namespace {

std::string Decoded(std::string_view in) {
  StatusOr<std::string> out = DecodeStdBase64(in);
  EXPECT_TRUE(out.ok()) << "input " << in << ": " << out.status().ToString();
  return out.ok() ? *out : "<error>";
}

std::string DecodeError(std::string_view in) {
  StatusOr<std::string> out = DecodeStdBase64(in);
  EXPECT_FALSE(out.ok()) << "input " << in << " decoded";
  return out.ok() ? "" : out.status().message();
}

TEST(Base64Test, DecodesPaddedQuanta) {
  EXPECT_EQ(Decoded(""), "");
  EXPECT_EQ(Decoded("QQ=="), "A");
  EXPECT_EQ(Decoded("QUI="), "AB");
  EXPECT_EQ(Decoded("QUJD"), "ABC");
  EXPECT_EQ(Decoded("aGVsbG8gd29ybGQ="), "hello world");
  EXPECT_EQ(Decoded("+/+/"), "\xfb\xff\xbf");
}

TEST(Base64Test, IgnoresNonZeroTrailingBitsLikeGoStdEncoding) {
  // StdEncoding is not Strict(): the unused bits of the last sextet are not checked.
  EXPECT_EQ(Decoded("QR=="), "A");
  EXPECT_EQ(Decoded("QUJ="), "AB");
}

TEST(Base64Test, SkipsCarriageReturnsAndNewlinesAnywhere) {
  EXPECT_EQ(Decoded("QU\r\nJD"), "ABC");
  EXPECT_EQ(Decoded("\nQUJD\n"), "ABC");
  EXPECT_EQ(Decoded("QQ=\n="), "A");
  EXPECT_EQ(Decoded("QQ==\r\n"), "A");
  EXPECT_EQ(Decoded("\r\n"), "");
}

TEST(Base64Test, RejectsOtherCharactersWithGoOffsets) {
  EXPECT_EQ(DecodeError("not-base64"), "illegal base64 data at input byte 3");
  EXPECT_EQ(DecodeError("QUJD QUJD"), "illegal base64 data at input byte 4");
  EXPECT_EQ(DecodeError("QUJD\t"), "illegal base64 data at input byte 4");
  EXPECT_EQ(DecodeError(" QUJD"), "illegal base64 data at input byte 0");
  EXPECT_EQ(DecodeError("QU.D"), "illegal base64 data at input byte 2");
  EXPECT_EQ(DecodeError(std::string("QU\0D", 4)), "illegal base64 data at input byte 2");
}

TEST(Base64Test, RequiresPaddingWithGoOffsets) {
  EXPECT_EQ(DecodeError("QQ"), "illegal base64 data at input byte 0");
  EXPECT_EQ(DecodeError("QUJ"), "illegal base64 data at input byte 0");
  EXPECT_EQ(DecodeError("QUJDQQ"), "illegal base64 data at input byte 4");
  EXPECT_EQ(DecodeError("QUJDQ"), "illegal base64 data at input byte 4");
  // Go counts back from the end by the characters read, newlines not included.
  EXPECT_EQ(DecodeError("QU\nJ"), "illegal base64 data at input byte 1");
}

TEST(Base64Test, RejectsMisplacedPaddingWithGoOffsets) {
  EXPECT_EQ(DecodeError("=QQQ"), "illegal base64 data at input byte 0");
  EXPECT_EQ(DecodeError("Q==="), "illegal base64 data at input byte 1");
  EXPECT_EQ(DecodeError("QQ="), "illegal base64 data at input byte 3");
  EXPECT_EQ(DecodeError("QQ=\n"), "illegal base64 data at input byte 4");
  EXPECT_EQ(DecodeError("QQ=A"), "illegal base64 data at input byte 2");
  EXPECT_EQ(DecodeError("QUI=="), "illegal base64 data at input byte 4");
  EXPECT_EQ(DecodeError("QQ==QUJD"), "illegal base64 data at input byte 4");
  EXPECT_EQ(DecodeError("QQ==\nQ"), "illegal base64 data at input byte 5");
}

TEST(Base64Test, ErrorIsInvalidArgument) {
  StatusOr<std::string> out = DecodeStdBase64("@@@@");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kInvalidArgument);
}

TEST(Base64Test, EncodesWithPadding) {
  EXPECT_EQ(EncodeStdBase64(""), "");
  EXPECT_EQ(EncodeStdBase64("A"), "QQ==");
  EXPECT_EQ(EncodeStdBase64("AB"), "QUI=");
  EXPECT_EQ(EncodeStdBase64("ABC"), "QUJD");
  EXPECT_EQ(EncodeStdBase64("\xfb\xff\xbf"), "+/+/");
}

TEST(Base64Test, RoundTripsEveryByteValue) {
  std::string raw;
  for (int i = 0; i < 256; ++i) raw.push_back(static_cast<char>(i));
  EXPECT_EQ(Decoded(EncodeStdBase64(raw)), raw);
}

TEST(Base64Test, RoundTripsInputsLargerThanOneOpenSslChunk) {
  std::string raw;
  for (int i = 0; i < 200001; ++i) raw.push_back(static_cast<char>((i * 7919) & 0xFF));
  const std::string encoded = EncodeStdBase64(raw);
  EXPECT_EQ(encoded.size(), (raw.size() + 2) / 3 * 4);
  EXPECT_EQ(Decoded(encoded), raw);
}

TEST(Base64Test, DecodesPemStyleLineWrapping) {
  const std::string raw(1000, 'x');
  std::string encoded = EncodeStdBase64(raw);
  std::string wrapped;
  for (size_t i = 0; i < encoded.size(); i += 64) wrapped += encoded.substr(i, 64) + "\r\n";
  EXPECT_EQ(Decoded(wrapped), raw);
}

}  // namespace
}  // namespace hotfix
