#include "wire/http_proxy.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace hotfix::wire {
namespace {

constexpr char kProxy[] = "http://proxy.corp:3128";

// True when dest goes through kProxy under no_proxy.
bool Proxied(const std::string& no_proxy, const std::string& host, uint16_t port = 443) {
  auto selected = SelectProxy(kProxy, no_proxy, host, port);
  EXPECT_TRUE(selected.ok()) << selected.status().ToString();
  return selected.ok() && selected->has_value();
}

TEST(SelectProxy, NoProxyVariableMeansDirect) {
  auto selected = SelectProxy("", "", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  EXPECT_FALSE(selected->has_value());
}

TEST(SelectProxy, ProxiesWhenNothingBypasses) {
  auto selected = SelectProxy(kProxy, "", "myaks.hcp.eastus.azmk8s.io", 443);
  ASSERT_TRUE(selected.ok());
  ASSERT_TRUE(selected->has_value());
  EXPECT_EQ((*selected)->host, "proxy.corp");
  EXPECT_EQ((*selected)->port, 3128);
  EXPECT_EQ((*selected)->proxy_authorization, "");
}

TEST(SelectProxy, StarBypassesEverything) {
  EXPECT_FALSE(Proxied("*", "example.com"));
  EXPECT_FALSE(Proxied("*", "10.1.2.3"));
  EXPECT_FALSE(Proxied(" * ", "example.com"));
  EXPECT_FALSE(Proxied("foo.com,*", "example.com"));
  // "*" only counts as a whole entry.
  EXPECT_TRUE(Proxied("*example.com", "example.com"));
}

TEST(SelectProxy, DomainMatchesItselfAndSubdomains) {
  EXPECT_FALSE(Proxied("example.com", "example.com"));
  EXPECT_FALSE(Proxied("example.com", "a.example.com"));
  EXPECT_FALSE(Proxied("example.com", "b.a.example.com"));
  EXPECT_TRUE(Proxied("example.com", "badexample.com"));
  EXPECT_TRUE(Proxied("example.com", "example.com.evil"));
  EXPECT_TRUE(Proxied("example.com", "other.org"));
}

TEST(SelectProxy, LeadingDotMatchesSubdomainsOnly) {
  EXPECT_TRUE(Proxied(".example.com", "example.com"));
  EXPECT_FALSE(Proxied(".example.com", "a.example.com"));
  EXPECT_FALSE(Proxied("*.example.com", "a.example.com"));
  EXPECT_TRUE(Proxied("*.example.com", "example.com"));
}

TEST(SelectProxy, CaseAndSpacesIgnored) {
  EXPECT_FALSE(Proxied(" Example.COM ", "a.example.com"));
  EXPECT_FALSE(Proxied("example.com", "A.EXAMPLE.com"));
  EXPECT_FALSE(Proxied("foo.org, ,example.com,,", "example.com"));
}

TEST(SelectProxy, DomainWithPort) {
  EXPECT_FALSE(Proxied("example.com:443", "example.com", 443));
  EXPECT_TRUE(Proxied("example.com:443", "example.com", 6443));
  EXPECT_FALSE(Proxied("example.com:6443", "a.example.com", 6443));
  // An empty port after the colon matches any port.
  EXPECT_FALSE(Proxied("example.com:", "example.com", 8443));
}

TEST(SelectProxy, IpAddresses) {
  EXPECT_FALSE(Proxied("10.1.2.3", "10.1.2.3"));
  EXPECT_TRUE(Proxied("10.1.2.3", "10.1.2.4"));
  EXPECT_FALSE(Proxied("10.1.2.3:443", "10.1.2.3", 443));
  EXPECT_TRUE(Proxied("10.1.2.3:443", "10.1.2.3", 80));
  EXPECT_FALSE(Proxied("2001:db8::1", "2001:db8::1"));
  EXPECT_FALSE(Proxied("[2001:db8::1]:443", "2001:db8::1", 443));
  EXPECT_TRUE(Proxied("[2001:db8::1]:443", "2001:db8::1", 80));
  EXPECT_TRUE(Proxied("2001:db8::1", "2001:db8::2"));
  // IPv4-mapped IPv6 equals its IPv4 address, as Go's net.IP.Equal.
  EXPECT_FALSE(Proxied("::ffff:10.1.2.3", "10.1.2.3"));
  EXPECT_FALSE(Proxied("10.1.2.3", "::ffff:10.1.2.3"));
  // A name is not resolved: an IP entry does not bypass a host name.
  EXPECT_TRUE(Proxied("10.1.2.3", "host.example"));
}

TEST(SelectProxy, CidrBlocks) {
  EXPECT_FALSE(Proxied("10.0.0.0/8", "10.200.3.4"));
  EXPECT_TRUE(Proxied("10.0.0.0/8", "11.0.0.1"));
  EXPECT_FALSE(Proxied("192.168.1.0/24", "192.168.1.77"));
  EXPECT_TRUE(Proxied("192.168.1.0/24", "192.168.2.1"));
  EXPECT_FALSE(Proxied("0.0.0.0/0", "8.8.8.8"));
  EXPECT_FALSE(Proxied("2001:db8::/32", "2001:db8:ffff::1"));
  EXPECT_TRUE(Proxied("2001:db8::/32", "2001:db9::1"));
  // An IPv4 block never contains an IPv6 address and vice versa.
  EXPECT_TRUE(Proxied("0.0.0.0/0", "2001:db8::1"));
  EXPECT_TRUE(Proxied("::/0", "10.1.2.3"));
  // CIDRs do not match names.
  EXPECT_TRUE(Proxied("10.0.0.0/8", "ten.example"));
  // A malformed block is kept as a (useless) domain entry, not an error.
  EXPECT_TRUE(Proxied("10.0.0.0/33", "10.0.0.1"));
}

TEST(SelectProxy, LocalhostAndLoopbackNeverProxied) {
  auto direct = [](const std::string& host) {
    auto selected = SelectProxy(kProxy, "", host, 443);
    return selected.ok() && !selected->has_value();
  };
  EXPECT_TRUE(direct("localhost"));
  EXPECT_TRUE(direct("127.0.0.1"));
  EXPECT_TRUE(direct("127.10.20.30"));
  EXPECT_TRUE(direct("::1"));
  EXPECT_TRUE(direct("::ffff:127.0.0.1"));
  // Go compares "localhost" case-sensitively and does not special-case its subdomains.
  EXPECT_FALSE(direct("LOCALHOST"));
  EXPECT_FALSE(direct("foo.localhost"));
}

TEST(SelectProxy, GoQuirksKept) {
  // A dotted fragment is a domain suffix, so it matches IP text ending in it.
  EXPECT_FALSE(Proxied("2.3.4", "1.2.3.4"));
  // A bracketed IPv6 entry without a port is not an IP entry in Go.
  EXPECT_TRUE(Proxied("[2001:db8::1]", "2001:db8::1"));
  // Entries without a host are ignored.
  EXPECT_TRUE(Proxied(":443", "example.com"));
  // A destination Go cannot split back into host and port goes direct.
  EXPECT_FALSE(Proxied("", "[fe80::1]"));
}

TEST(SelectProxy, SchemeLessProxyIsHttp) {
  auto selected = SelectProxy("proxy.corp:8080", "", "example.com", 443);
  ASSERT_TRUE(selected.ok()) << selected.status().ToString();
  ASSERT_TRUE(selected->has_value());
  EXPECT_EQ((*selected)->host, "proxy.corp");
  EXPECT_EQ((*selected)->port, 8080);

  selected = SelectProxy("10.0.0.5:3128", "", "example.com", 443);
  ASSERT_TRUE(selected.ok()) << selected.status().ToString();
  EXPECT_EQ((*selected)->host, "10.0.0.5");
  EXPECT_EQ((*selected)->port, 3128);
}

TEST(SelectProxy, DefaultPortIs80) {
  for (const char* url : {"http://proxy.corp", "http://proxy.corp:", "http://proxy.corp/",
                          "proxy.corp", "HTTP://proxy.corp"}) {
    auto selected = SelectProxy(url, "", "example.com", 443);
    ASSERT_TRUE(selected.ok()) << url << ": " << selected.status().ToString();
    ASSERT_TRUE(selected->has_value()) << url;
    EXPECT_EQ((*selected)->host, "proxy.corp") << url;
    EXPECT_EQ((*selected)->port, 80) << url;
  }
}

TEST(SelectProxy, Ipv6Proxy) {
  auto selected = SelectProxy("http://[2001:db8::5]:3128", "", "example.com", 443);
  ASSERT_TRUE(selected.ok()) << selected.status().ToString();
  EXPECT_EQ((*selected)->host, "2001:db8::5");
  EXPECT_EQ((*selected)->port, 3128);
}

TEST(SelectProxy, UserinfoBecomesBasicAuth) {
  auto selected = SelectProxy("http://alice:s3cret@proxy.corp:3128", "", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  // base64("alice:s3cret")
  EXPECT_EQ((*selected)->proxy_authorization, "Basic YWxpY2U6czNjcmV0");
  EXPECT_EQ((*selected)->host, "proxy.corp");

  // Escapes are decoded before encoding, and the last '@' separates the host.
  selected = SelectProxy("http://bob:p%40ss%3Aword@proxy.corp:3128", "", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  EXPECT_EQ((*selected)->proxy_authorization, "Basic Ym9iOnBAc3M6d29yZA==");  // bob:p@ss:word

  // A user without a password is "user:" like Go's basicAuth.
  selected = SelectProxy("http://carol@proxy.corp:3128", "", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  EXPECT_EQ((*selected)->proxy_authorization, "Basic Y2Fyb2w6");
}

TEST(SelectProxy, BadUrlsAreErrorsThatHideTheValue) {
  for (const char* url :
       {"http://", "http://:3128", "http://proxy.corp:99999", "http://proxy.corp:0",
        "http://proxy.corp:port", "http://pro xy:3128", "http://[::1", "http://[nothex]:80",
        "http://user:p%zzss@proxy.corp:3128", "socks5://proxy.corp:1080", "ftp://proxy.corp",
        "://proxy.corp", "http://a:b:3128"}) {
    auto selected = SelectProxy(url, "", "example.com", 443);
    ASSERT_FALSE(selected.ok()) << url;
    EXPECT_EQ(selected.status().code(), Status::Code::kInvalidArgument) << url;
    EXPECT_NE(selected.status().message().find("invalid HTTPS_PROXY"), std::string::npos)
        << selected.status().message();
    EXPECT_EQ(selected.status().message().find("proxy.corp"), std::string::npos)
        << selected.status().message();
  }
}

TEST(SelectProxy, HttpsProxySchemeRejectedClearly) {
  auto selected = SelectProxy("https://user:pw@proxy.corp:443", "", "example.com", 443);
  ASSERT_FALSE(selected.ok());
  EXPECT_EQ(selected.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(selected.status().message().find("https:// proxies are not supported"),
            std::string::npos)
      << selected.status().message();
  EXPECT_EQ(selected.status().message().find("pw"), std::string::npos);
}

TEST(SelectProxy, BypassedHostIgnoresBrokenProxyUrl) {
  auto selected = SelectProxy("http://[broken", "example.com", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  EXPECT_FALSE(selected->has_value());
}

// Sets and restores the proxy variables around one test.
class ProxyEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVars) unsetenv(name);
  }
  void TearDown() override {
    for (const char* name : kVars) unsetenv(name);
  }
  static constexpr const char* kVars[] = {"HTTPS_PROXY",   "https_proxy", "HTTP_PROXY",
                                          "http_proxy",    "NO_PROXY",    "no_proxy",
                                          "REQUEST_METHOD"};
};

TEST_F(ProxyEnvTest, NothingSet) {
  auto selected = ProxyFromEnvironment("https", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  EXPECT_FALSE(selected->has_value());
}

TEST_F(ProxyEnvTest, UpperCaseWins) {
  setenv("HTTPS_PROXY", "http://upper:1111", 1);
  setenv("https_proxy", "http://lower:2222", 1);
  auto selected = ProxyFromEnvironment("https", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  ASSERT_TRUE(selected->has_value());
  EXPECT_EQ((*selected)->host, "upper");
}

TEST_F(ProxyEnvTest, EmptyUpperCaseFallsBackToLowerCase) {
  setenv("HTTPS_PROXY", "", 1);
  setenv("https_proxy", "http://lower:2222", 1);
  auto selected = ProxyFromEnvironment("https", "example.com", 443);
  ASSERT_TRUE(selected.ok());
  ASSERT_TRUE(selected->has_value());
  EXPECT_EQ((*selected)->host, "lower");
  EXPECT_EQ((*selected)->port, 2222);
}

TEST_F(ProxyEnvTest, NoProxyEitherCase) {
  setenv("HTTPS_PROXY", "http://upper:1111", 1);
  setenv("no_proxy", ".example.com", 1);
  auto selected = ProxyFromEnvironment("https", "a.example.com", 443);
  ASSERT_TRUE(selected.ok());
  EXPECT_FALSE(selected->has_value());
  setenv("NO_PROXY", "other.org", 1);  // upper case shadows lower case
  selected = ProxyFromEnvironment("https", "a.example.com", 443);
  ASSERT_TRUE(selected.ok());
  EXPECT_TRUE(selected->has_value());
}

TEST_F(ProxyEnvTest, ErrorNamesTheVariableUsed) {
  setenv("https_proxy", "http://user:hunter2@[bad", 1);
  auto selected = ProxyFromEnvironment("https", "example.com", 443);
  ASSERT_FALSE(selected.ok());
  EXPECT_NE(selected.status().message().find("invalid https_proxy"), std::string::npos)
      << selected.status().message();
  EXPECT_EQ(selected.status().message().find("hunter2"), std::string::npos);
}

TEST_F(ProxyEnvTest, EachSchemeHasItsOwnVariable) {
  setenv("HTTPS_PROXY", "http://tls-proxy:1111", 1);
  setenv("HTTP_PROXY", "http://plain-proxy:2222", 1);
  auto https = ProxyFromEnvironment("https", "packages.example.com", 443);
  auto http = ProxyFromEnvironment("http", "packages.example.com", 80);
  ASSERT_TRUE(https.ok() && https->has_value());
  ASSERT_TRUE(http.ok() && http->has_value());
  EXPECT_EQ((*https)->host, "tls-proxy");
  EXPECT_EQ((*http)->host, "plain-proxy");
  unsetenv("HTTP_PROXY");
  http = ProxyFromEnvironment("http", "packages.example.com", 80);
  ASSERT_TRUE(http.ok());
  EXPECT_FALSE(http->has_value()) << "HTTPS_PROXY must not serve http:// requests";
}

TEST_F(ProxyEnvTest, LoopbackNeverUsesTheProxy) {
  setenv("HTTP_PROXY", "http://plain-proxy:2222", 1);
  for (const char* host : {"localhost", "127.0.0.1", "127.1.2.3", "::1"}) {
    auto selected = ProxyFromEnvironment("http", host, 8080);
    ASSERT_TRUE(selected.ok());
    EXPECT_FALSE(selected->has_value()) << host;
  }
}

TEST_F(ProxyEnvTest, UpperCaseHttpProxyIsIgnoredInACgiProcess) {
  setenv("HTTP_PROXY", "http://from-a-request-header:1", 1);
  setenv("REQUEST_METHOD", "GET", 1);
  auto selected = ProxyFromEnvironment("http", "packages.example.com", 80);
  ASSERT_TRUE(selected.ok());
  EXPECT_FALSE(selected->has_value());
  setenv("http_proxy", "http://lower:3333", 1);
  selected = ProxyFromEnvironment("http", "packages.example.com", 80);
  ASSERT_TRUE(selected.ok() && selected->has_value());
  EXPECT_EQ((*selected)->host, "lower");
}

}  // namespace
}  // namespace hotfix::wire
