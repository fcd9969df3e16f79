#include "wire/grpc_status.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace hotfix::wire {
namespace {

TEST(GrpcCodeName, EveryCodeHasGrpcGoName) {
  const std::vector<std::pair<GrpcCode, std::string>> expected = {
      {GrpcCode::kOk, "OK"},
      {GrpcCode::kCanceled, "Canceled"},
      {GrpcCode::kUnknown, "Unknown"},
      {GrpcCode::kInvalidArgument, "InvalidArgument"},
      {GrpcCode::kDeadlineExceeded, "DeadlineExceeded"},
      {GrpcCode::kNotFound, "NotFound"},
      {GrpcCode::kAlreadyExists, "AlreadyExists"},
      {GrpcCode::kPermissionDenied, "PermissionDenied"},
      {GrpcCode::kResourceExhausted, "ResourceExhausted"},
      {GrpcCode::kFailedPrecondition, "FailedPrecondition"},
      {GrpcCode::kAborted, "Aborted"},
      {GrpcCode::kOutOfRange, "OutOfRange"},
      {GrpcCode::kUnimplemented, "Unimplemented"},
      {GrpcCode::kInternal, "Internal"},
      {GrpcCode::kUnavailable, "Unavailable"},
      {GrpcCode::kDataLoss, "DataLoss"},
      {GrpcCode::kUnauthenticated, "Unauthenticated"},
  };
  ASSERT_EQ(expected.size(), 17u);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(expected[i].first), i);
    EXPECT_EQ(GrpcCodeName(expected[i].first), expected[i].second);
  }
}

TEST(GrpcCodeName, OutOfRangeDoesNotCrash) {
  EXPECT_EQ(GrpcCodeName(static_cast<GrpcCode>(17)), "Code(out of range)");
}

TEST(ParseGrpcStatus, AcceptsEveryCode) {
  for (int code = 0; code <= 16; ++code) {
    auto parsed = ParseGrpcStatus(std::to_string(code));
    ASSERT_TRUE(parsed.has_value()) << code;
    EXPECT_EQ(static_cast<int>(*parsed), code);
  }
}

TEST(ParseGrpcStatus, RejectsEverythingElse) {
  for (const char* bad :
       {"", "17", "-1", "+1", " 1", "1 ", "1a", "0x1", "99999999999999999999", "5.0", "NotFound"}) {
    EXPECT_FALSE(ParseGrpcStatus(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(GrpcCodeFromHttpStatus, GrpcTable) {
  EXPECT_EQ(GrpcCodeFromHttpStatus(400), GrpcCode::kInternal);
  EXPECT_EQ(GrpcCodeFromHttpStatus(401), GrpcCode::kUnauthenticated);
  EXPECT_EQ(GrpcCodeFromHttpStatus(403), GrpcCode::kPermissionDenied);
  EXPECT_EQ(GrpcCodeFromHttpStatus(404), GrpcCode::kUnimplemented);
  EXPECT_EQ(GrpcCodeFromHttpStatus(429), GrpcCode::kUnavailable);
  EXPECT_EQ(GrpcCodeFromHttpStatus(502), GrpcCode::kUnavailable);
  EXPECT_EQ(GrpcCodeFromHttpStatus(503), GrpcCode::kUnavailable);
  EXPECT_EQ(GrpcCodeFromHttpStatus(504), GrpcCode::kUnavailable);
  for (int other : {200, 204, 301, 402, 405, 418, 500, 501, 505, 599, 0, -1}) {
    EXPECT_EQ(GrpcCodeFromHttpStatus(other), GrpcCode::kUnknown) << other;
  }
}

TEST(PercentDecode, PlainTextUnchanged) {
  EXPECT_EQ(PercentDecode(""), "");
  EXPECT_EQ(PercentDecode("no hotfix for node"), "no hotfix for node");
}

TEST(PercentDecode, DecodesEscapes) {
  EXPECT_EQ(PercentDecode("a%20b"), "a b");
  EXPECT_EQ(PercentDecode("100%25"), "100%");
  EXPECT_EQ(PercentDecode("%41%42%43"), "ABC");
  EXPECT_EQ(PercentDecode("line%0Anext"), "line\nnext");
  EXPECT_EQ(PercentDecode("%7e%7E"), "~~");
  EXPECT_EQ(PercentDecode("%00"), std::string(1, '\0'));
}

TEST(PercentDecode, DecodesUtf8Bytes) {
  EXPECT_EQ(PercentDecode("caf%C3%A9"), "caf\xC3\xA9");
  EXPECT_EQ(PercentDecode("%E2%9C%93 ok"), "\xE2\x9C\x93 ok");
  // Raw (unencoded) UTF-8 passes through untouched.
  EXPECT_EQ(PercentDecode("\xE2\x9C\x93"), "\xE2\x9C\x93");
}

TEST(PercentDecode, MalformedEscapesKeptLiterally) {
  EXPECT_EQ(PercentDecode("%"), "%");
  EXPECT_EQ(PercentDecode("%4"), "%4");
  EXPECT_EQ(PercentDecode("abc%"), "abc%");
  EXPECT_EQ(PercentDecode("abc%4"), "abc%4");
  EXPECT_EQ(PercentDecode("%zz"), "%zz");
  EXPECT_EQ(PercentDecode("%4g"), "%4g");
  EXPECT_EQ(PercentDecode("%g4"), "%g4");
  EXPECT_EQ(PercentDecode("%%41"), "%A");
  EXPECT_EQ(PercentDecode("%+1"), "%+1");
  EXPECT_EQ(PercentDecode("50% off%21"), "50% off!");
}

TEST(GrpcStatus, ToStringLikeGrpcGo) {
  GrpcStatus status{GrpcCode::kNotFound, "no such component"};
  EXPECT_EQ(status.ToString(), "code = NotFound desc = no such component");
  EXPECT_FALSE(status.ok());
  GrpcStatus bare{GrpcCode::kDeadlineExceeded, ""};
  EXPECT_EQ(bare.ToString(), "code = DeadlineExceeded");
  GrpcStatus ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.ToString(), "code = OK");
}

}  // namespace
}  // namespace hotfix::wire
