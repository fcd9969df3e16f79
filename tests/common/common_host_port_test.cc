#include "common/host_port.h"

#include <gtest/gtest.h>

namespace hotfix {
namespace {

TEST(HostPortTest, JoinBracketsHostsWithColons) {
  EXPECT_EQ(JoinHostPort("example.com", "443"), "example.com:443");
  EXPECT_EQ(JoinHostPort("fe80::1%eth0", "80"), "[fe80::1%eth0]:80");
  EXPECT_EQ(JoinHostPort("10.0.0.1", uint16_t{3128}), "10.0.0.1:3128");
  EXPECT_EQ(BracketHost("::1"), "[::1]");
  EXPECT_EQ(BracketHost("example.com"), "example.com");
  EXPECT_EQ(BracketHost(""), "");
}

TEST(HostPortTest, SplitAcceptsWhatGoAccepts) {
  auto split = [](std::string_view s) {
    std::optional<HostPort> hp = SplitHostPort(s);
    return hp ? std::string(hp->host) + "|" + std::string(hp->port) : std::string("error");
  };
  EXPECT_EQ(split("host:80"), "host|80");
  EXPECT_EQ(split("[::1]:443"), "::1|443");
  EXPECT_EQ(split("[host]:80"), "host|80");
  EXPECT_EQ(split(":80"), "|80");
  EXPECT_EQ(split("[]:80"), "|80");
  EXPECT_EQ(split("host:"), "host|");
  EXPECT_EQ(split("host:port"), "host|port");  // the port is not checked
}

TEST(HostPortTest, SplitRefusesWhatGoRefuses) {
  for (std::string_view bad : {"", "host", "[::1]", "::1:80", "[::1]x:80", "[::1]:80:90", "[::1:80",
                               "a]:80", "a[b:80", "[a[b]:80"}) {
    EXPECT_FALSE(SplitHostPort(bad).has_value()) << bad;
  }
}

TEST(HostPortTest, ParsePortTakesDecimalOneTo65535) {
  EXPECT_EQ(ParsePort("1"), uint16_t{1});
  EXPECT_EQ(ParsePort("443"), uint16_t{443});
  EXPECT_EQ(ParsePort("65535"), uint16_t{65535});
  EXPECT_EQ(ParsePort("000443"), uint16_t{443});  // leading zeros, as Go allows
  for (std::string_view bad : {"", "0", "00", "65536", "99999999999999999999", "-1", "+1", "4 43",
                               "443 ", "0x1bb", "https"}) {
    EXPECT_FALSE(ParsePort(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace hotfix
