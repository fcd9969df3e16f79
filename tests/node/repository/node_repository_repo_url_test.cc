#include "node/repository/repo_url.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hotfix::node::repository {
namespace {

using ::testing::HasSubstr;

wire::Url Base(std::string_view text) {
  StatusOr<wire::Url> base = ParseRepositoryBase(text);
  EXPECT_TRUE(base.ok()) << text << ": " << base.status().ToString();
  return base.ok() ? *base : wire::Url{};
}

TEST(ParseRepositoryBaseTest, HttpsAnywhereAndTheTrailingSlashForced) {
  wire::Url base = Base("https://packages.microsoft.com/ubuntu/22.04/prod#ignored");
  EXPECT_EQ(base.ToString(), "https://packages.microsoft.com/ubuntu/22.04/prod/");
  EXPECT_EQ(Base("https://packages.microsoft.com").path, "/");
}

TEST(ParseRepositoryBaseTest, PlainHttpOnlyToLocalAddresses) {
  for (const char* ok : {"http://localhost/r", "http://127.0.0.1:8080/r", "http://127.5.5.5/",
                         "http://10.1.2.3/", "http://172.16.0.1/", "http://172.31.255.255/",
                         "http://192.168.1.1/", "http://169.254.169.254/", "http://[::1]/",
                         "http://[fd00::1]/", "http://[fe80::1]/", "http://[::ffff:10.0.0.1]/"}) {
    EXPECT_TRUE(ParseRepositoryBase(ok).ok()) << ok;
  }
  for (const char* public_http :
       {"http://packages.microsoft.com/", "http://172.32.0.1/", "http://192.0.2.2/",
        "http://8.8.8.8/", "http://[2001:db8::1]/", "http://localhost.example.com/"}) {
    StatusOr<wire::Url> base = ParseRepositoryBase(public_http);
    ASSERT_FALSE(base.ok()) << public_http;
    EXPECT_EQ(base.status().code(), Status::Code::kFailedPrecondition);
    EXPECT_THAT(base.status().message(), HasSubstr("plain http only"));
  }
}

TEST(ParseRepositoryBaseTest, UnsupportedShapesFallBack) {
  for (const char* bad : {"ftp://example.com/r", "https://user:pw@example.com/r",
                          "https://example.com/r?token=1", "not a url", "file:///srv/repo"}) {
    StatusOr<wire::Url> base = ParseRepositoryBase(bad);
    ASSERT_FALSE(base.ok()) << bad;
    EXPECT_EQ(base.status().code(), Status::Code::kFailedPrecondition) << bad;
    EXPECT_THAT(base.status().message(), ::testing::Not(HasSubstr("pw@")));
  }
}

TEST(RepositoryFileUrlTest, RelativePathsUnderTheBase) {
  const wire::Url base = Base("https://packages.microsoft.com/ubuntu/22.04/prod");
  StatusOr<wire::Url> url = RepositoryFileUrl(base, "dists/jammy/main/binary-amd64/Packages.gz");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->ToString(),
            "https://packages.microsoft.com/ubuntu/22.04/prod/dists/jammy/main/binary-amd64/"
            "Packages.gz");
  // Cleaned as Go's path.Clean would, still inside.
  url = RepositoryFileUrl(base, "dists/./jammy//x/../InRelease");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->path, "/ubuntu/22.04/prod/dists/jammy/InRelease");
}

TEST(RepositoryFileUrlTest, EscapesAreIntegrityFailures) {
  const wire::Url base = Base("https://packages.microsoft.com/ubuntu/22.04/prod/");
  for (const char* bad : {"../x", "a/../../x", "..", ".", "", "/etc/passwd", "//evil.example/x",
                          "https://evil.example/x", "http:x", "a?b", "a#b", "a b", "%2e%2e/x",
                          "a/%2e%2e/%2e%2e/x", "dists/\x01"}) {
    StatusOr<wire::Url> url = RepositoryFileUrl(base, bad);
    ASSERT_FALSE(url.ok()) << bad;
    EXPECT_EQ(url.status().code(), Status::Code::kDataLoss) << bad;
  }
}

TEST(WithinRepositoryTest, SameOriginAndUnderThePath) {
  const wire::Url base = Base("https://repo.example:8443/ubuntu/prod/");
  auto url = [](std::string_view text) { return *wire::ParseAbsoluteUrl(text); };
  EXPECT_TRUE(WithinRepository(base, url("https://repo.example:8443/ubuntu/prod/pool/x.deb")));
  EXPECT_TRUE(WithinRepository(base, url("https://REPO.example:8443/ubuntu/prod/x")));
  EXPECT_FALSE(WithinRepository(base, url("https://repo.example:8443/ubuntu/prodx")));
  EXPECT_FALSE(WithinRepository(base, url("https://repo.example:8443/ubuntu/prod/../x")));
  EXPECT_FALSE(WithinRepository(base, url("http://repo.example:8443/ubuntu/prod/x")));
  EXPECT_FALSE(WithinRepository(base, url("https://repo.example/ubuntu/prod/x")));
  EXPECT_FALSE(WithinRepository(base, url("https://other.example:8443/ubuntu/prod/x")));
  EXPECT_FALSE(WithinRepository(base, url("https://u@repo.example:8443/ubuntu/prod/x")));
}

}  // namespace
}  // namespace hotfix::node::repository
