#include "wire/url.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hotfix::wire {
namespace {

using ::testing::HasSubstr;

Url Parse(std::string_view text) {
  StatusOr<Url> url = ParseAbsoluteUrl(text);
  EXPECT_TRUE(url.ok()) << text << ": " << url.status().ToString();
  return url.ok() ? *url : Url{};
}

TEST(ParseAbsoluteUrlTest, ThePartsOfAUrl) {
  Url url = Parse("HTTPS://user:secret@Packages.Microsoft.com:8443/ubuntu/22.04/prod?x=1#frag");
  EXPECT_EQ(url.scheme, "https");
  EXPECT_TRUE(url.has_userinfo);
  EXPECT_EQ(url.host, "packages.microsoft.com");
  ASSERT_TRUE(url.port.has_value());
  EXPECT_EQ(*url.port, 8443);
  EXPECT_EQ(url.path, "/ubuntu/22.04/prod");
  EXPECT_EQ(url.query, "x=1");
  EXPECT_EQ(url.fragment, "frag");
  // The password is never written back.
  EXPECT_EQ(url.ToString(), "https://packages.microsoft.com:8443/ubuntu/22.04/prod?x=1#frag");
  EXPECT_EQ(url.RequestTarget(), "/ubuntu/22.04/prod?x=1");
}

TEST(ParseAbsoluteUrlTest, DefaultPortsAndIpv6) {
  EXPECT_EQ(Parse("http://a").EffectivePort(), 80);
  EXPECT_EQ(Parse("https://a").EffectivePort(), 443);
  Url v6 = Parse("http://[::1]:8080/x");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.Authority(), "[::1]:8080");
  EXPECT_EQ(Parse("http://[fe80::1]").Authority(), "[fe80::1]");
  EXPECT_EQ(Parse("http://a").RequestTarget(), "/");
}

TEST(ParseAbsoluteUrlTest, RefusesWhatIsNotAnAbsoluteUrl) {
  for (const char* bad :
       {"", "packages.microsoft.com/x", "/x", "http:/x", "1http://a/", "http://", "http://:80/",
        "http://a:0/", "http://a:65536/", "http://a:/", "http://a:8x/", "http://[::1/",
        "http://[zz]/", "http://[::1]x/", "http://a b/", "http://a/b c", "http://a/\x01",
        "http://a/\xc3\xa9", "http://a%2f/"}) {
    StatusOr<Url> url = ParseAbsoluteUrl(bad);
    EXPECT_FALSE(url.ok()) << bad;
    if (!url.ok()) EXPECT_EQ(url.status().code(), Status::Code::kInvalidArgument);
  }
  EXPECT_FALSE(ParseAbsoluteUrl("http://a/" + std::string(9000, 'x')).ok());
}

TEST(ParseAbsoluteUrlTest, ErrorsNeverEchoTheUrl) {
  StatusOr<Url> url = ParseAbsoluteUrl("http://user:hunter2@[bad/");
  ASSERT_FALSE(url.ok());
  EXPECT_THAT(url.status().message(), ::testing::Not(HasSubstr("hunter2")));
}

// RFC 3986 section 5.4's examples, base "http://a/b/c/d;p?q".
TEST(ResolveReferenceTest, Rfc3986Examples) {
  const Url base = Parse("http://a/b/c/d;p?q");
  const std::pair<const char*, const char*> cases[] = {
      {"g:h", "g:h"},  // another scheme: not http, but still resolved
      {"g", "http://a/b/c/g"},
      {"./g", "http://a/b/c/g"},
      {"g/", "http://a/b/c/g/"},
      {"/g", "http://a/g"},
      {"//g", "http://g"},
      {"?y", "http://a/b/c/d;p?y"},
      {"g?y", "http://a/b/c/g?y"},
      {"#s", "http://a/b/c/d;p?q#s"},
      {"g#s", "http://a/b/c/g#s"},
      {";x", "http://a/b/c/;x"},
      {"", "http://a/b/c/d;p?q"},
      {".", "http://a/b/c/"},
      {"./", "http://a/b/c/"},
      {"..", "http://a/b/"},
      {"../", "http://a/b/"},
      {"../g", "http://a/b/g"},
      {"../..", "http://a/"},
      {"../../g", "http://a/g"},
      {"../../../g", "http://a/g"},
      {"../../../../g", "http://a/g"},
      {"/./g", "http://a/g"},
      {"/../g", "http://a/g"},
      {"g.", "http://a/b/c/g."},
      {".g", "http://a/b/c/.g"},
      {"g..", "http://a/b/c/g.."},
      {"..g", "http://a/b/c/..g"},
      {"./../g", "http://a/b/g"},
      {"./g/.", "http://a/b/c/g/"},
      {"g/./h", "http://a/b/c/g/h"},
      {"g/../h", "http://a/b/c/h"},
  };
  for (const auto& [reference, want] : cases) {
    if (std::string_view(reference) == "g:h") {
      // "g:h" has no authority: not an absolute URL this parser takes.
      EXPECT_FALSE(ResolveReference(base, reference).ok());
      continue;
    }
    StatusOr<Url> got = ResolveReference(base, reference);
    ASSERT_TRUE(got.ok()) << reference << ": " << got.status().ToString();
    EXPECT_EQ(got->ToString(), want) << reference;
  }
}

TEST(ResolveReferenceTest, AnAbsoluteLocationReplacesTheBase) {
  const Url base = Parse("https://repo.example/ubuntu/dists/x/InRelease");
  StatusOr<Url> got = ResolveReference(base, "https://mirror.example/a/../ubuntu/InRelease");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->ToString(), "https://mirror.example/ubuntu/InRelease");
}

TEST(RemoveDotSegmentsTest, NeverClimbsAboveTheRoot) {
  EXPECT_EQ(RemoveDotSegments("/a/b/c/./../../g"), "/a/g");
  EXPECT_EQ(RemoveDotSegments("mid/content=5/../6"), "mid/6");
  EXPECT_EQ(RemoveDotSegments("/../../../etc/passwd"), "/etc/passwd");
  EXPECT_EQ(RemoveDotSegments("/a/.."), "/");
  EXPECT_EQ(RemoveDotSegments(""), "");
}

}  // namespace
}  // namespace hotfix::wire
