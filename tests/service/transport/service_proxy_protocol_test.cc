#include "service/transport/proxy_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hotfix::service {
namespace {

using ::testing::HasSubstr;

const std::string kSignature("\r\n\r\n\0\r\nQUIT\n", 12);

std::string Be16(uint16_t v) {
  return std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

// A version 2 header: version/command byte, family/protocol byte, then `rest`.
std::string Header(uint8_t version_command, uint8_t family_protocol, const std::string& rest) {
  return kSignature + static_cast<char>(version_command) + static_cast<char>(family_protocol) +
         Be16(static_cast<uint16_t>(rest.size())) + rest;
}

std::string Ipv4Block(const char* source, uint16_t source_port) {
  in_addr src{}, dst{};
  inet_pton(AF_INET, source, &src);
  inet_pton(AF_INET, "10.0.0.5", &dst);
  return std::string(reinterpret_cast<const char*>(&src), 4) +
         std::string(reinterpret_cast<const char*>(&dst), 4) + Be16(source_port) + Be16(8443);
}

std::string AddressText(const std::optional<sockaddr_storage>& address) {
  if (!address) return "none";
  char text[INET6_ADDRSTRLEN] = {};
  if (address->ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&*address);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&*address);
  inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6->sin6_port));
}

std::string SourceText(const ProxyHeader& h) { return AddressText(h.source); }
// The address the node dialed: a ClientHello without a server name gets its certificate.
std::string DestinationText(const ProxyHeader& h) { return AddressText(h.destination); }

TEST(ProxyProtocolTest, AnIpv4ProxyHeaderGivesTheNodesAddressAndItsLength) {
  const std::string header = Header(0x21, 0x11, Ipv4Block("192.0.2.7", 40001));
  ProxyHeader h = ParseProxyHeader(header + "\x16\x03\x01 the TLS ClientHello");
  ASSERT_EQ(h.state, ProxyHeader::kComplete) << h.error.ToString();
  EXPECT_EQ(h.size, header.size());
  EXPECT_EQ(h.size, 28u);
  EXPECT_EQ(SourceText(h), "192.0.2.7:40001");
  EXPECT_EQ(DestinationText(h), "10.0.0.5:8443");
}

TEST(ProxyProtocolTest, AnIpv6ProxyHeaderGivesTheNodesAddress) {
  in6_addr src{}, dst{};
  inet_pton(AF_INET6, "2001:db8::7", &src);
  inet_pton(AF_INET6, "2001:db8::5", &dst);
  const std::string block = std::string(reinterpret_cast<const char*>(&src), 16) +
                            std::string(reinterpret_cast<const char*>(&dst), 16) + Be16(40002) +
                            Be16(8443);
  ProxyHeader h = ParseProxyHeader(Header(0x21, 0x21, block));
  ASSERT_EQ(h.state, ProxyHeader::kComplete) << h.error.ToString();
  EXPECT_EQ(SourceText(h), "[2001:db8::7]:40002");
  EXPECT_EQ(DestinationText(h), "[2001:db8::5]:8443");
}

TEST(ProxyProtocolTest, TlvsAfterTheAddressesAreSkipped) {
  // PP2_TYPE_ALPN "h2" and PP2_TYPE_NOOP, as HAProxy's proxy-v2-options can add.
  const std::string tlvs = std::string("\x01\x00\x02h2\x04\x00\x00", 8);
  const std::string header = Header(0x21, 0x11, Ipv4Block("192.0.2.7", 40001) + tlvs);
  ProxyHeader h = ParseProxyHeader(header + "rest");
  ASSERT_EQ(h.state, ProxyHeader::kComplete);
  EXPECT_EQ(h.size, header.size());
  EXPECT_EQ(SourceText(h), "192.0.2.7:40001");
}

// Azure's Private Link service adds TLV 0xEE: subtype 0x01 and the private endpoint's link ID,
// a little-endian uint32. Read wherever it sits among the TLVs; anything else about it (another
// subtype, another length) is not a link ID; TLVs that overrun the header end the walk.
TEST(ProxyProtocolTest, AzurePrivateEndpointLinkIdIsRead) {
  const std::string alpn = std::string("\x01\x00\x02h2", 5);
  const std::string link = std::string("\xee\x00\x05\x01\x78\x56\x34\x12", 8);
  ProxyHeader h = ParseProxyHeader(Header(0x21, 0x11, Ipv4Block("10.0.0.9", 1) + alpn + link));
  ASSERT_EQ(h.state, ProxyHeader::kComplete) << h.error.ToString();
  EXPECT_EQ(h.azure_link_id, 0x12345678u);
  EXPECT_EQ(SourceText(h), "10.0.0.9:1");
  for (const std::string& tlvs : {std::string("\xee\x00\x05\x02\x78\x56\x34\x12", 8),  // subtype
                                  std::string("\xee\x00\x04\x01\x78\x56\x34", 7),      // short
                                  std::string("\x01\x00\x09h2", 5) + link,             // overruns
                                  std::string("\xee\x00", 2)}) {                       // cut
    ProxyHeader other = ParseProxyHeader(Header(0x21, 0x11, Ipv4Block("10.0.0.9", 1) + tlvs));
    ASSERT_EQ(other.state, ProxyHeader::kComplete) << other.error.ToString();
    EXPECT_FALSE(other.azure_link_id.has_value());
    EXPECT_EQ(SourceText(other), "10.0.0.9:1");
  }
}

TEST(ProxyProtocolTest, LocalUnspecifiedAndUnixKeepTheConnectionsOwnPeer) {
  for (const std::string& header :
       {Header(0x20, 0x00, ""), Header(0x20, 0x11, Ipv4Block("192.0.2.7", 1)),
        Header(0x21, 0x00, ""), Header(0x21, 0x31, std::string(216, 'a'))}) {
    ProxyHeader h = ParseProxyHeader(header);
    ASSERT_EQ(h.state, ProxyHeader::kComplete) << h.error.ToString();
    EXPECT_EQ(h.size, header.size());
    EXPECT_FALSE(h.source.has_value());
    EXPECT_FALSE(h.destination.has_value());
  }
}

// Each shorter prefix needs more, and says how much: the 16-byte prefix, then the whole
// header, so a reader never takes a byte of what follows.
TEST(ProxyProtocolTest, EveryShorterPrefixNeedsMoreAndSaysHowMuch) {
  const std::string header = Header(0x21, 0x11, Ipv4Block("192.0.2.7", 40001));
  for (size_t n = 0; n < header.size(); ++n) {
    ProxyHeader h = ParseProxyHeader(header.substr(0, n));
    EXPECT_EQ(h.state, ProxyHeader::kNeedMore) << n;
    EXPECT_EQ(h.size, n == 0 ? 6u : n < 16 ? 16u : header.size()) << n;
  }
  const std::string line = "PROXY TCP4 192.0.2.7 10.0.0.5 40001 8443\r\n";
  for (size_t n = 0; n < line.size(); ++n) {
    ProxyHeader h = ParseProxyHeader(line.substr(0, n));
    EXPECT_EQ(h.state, ProxyHeader::kNeedMore) << n;
    EXPECT_EQ(h.size, n < 6 ? 6u : n + 1) << n;
  }
}

// nginx's `proxy_protocol on` (version 1, the only one it sends).
TEST(ProxyProtocolTest, AVersion1LineGivesTheNodesAddress) {
  const std::string v4 = "PROXY TCP4 192.0.2.7 10.0.0.5 40001 8443\r\n";
  ProxyHeader h = ParseProxyHeader(v4 + "\x16\x03\x01");
  ASSERT_EQ(h.state, ProxyHeader::kComplete) << h.error.ToString();
  EXPECT_EQ(h.size, v4.size());
  EXPECT_EQ(SourceText(h), "192.0.2.7:40001");
  EXPECT_EQ(DestinationText(h), "10.0.0.5:8443");
  h = ParseProxyHeader("PROXY TCP6 2001:db8::7 2001:db8::5 40002 8443\r\n");
  ASSERT_EQ(h.state, ProxyHeader::kComplete) << h.error.ToString();
  EXPECT_EQ(SourceText(h), "[2001:db8::7]:40002");
  EXPECT_EQ(DestinationText(h), "[2001:db8::5]:8443");
  h = ParseProxyHeader("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n");
  ASSERT_EQ(h.state, ProxyHeader::kComplete);
  EXPECT_FALSE(h.source.has_value());
  EXPECT_FALSE(h.destination.has_value());
  h = ParseProxyHeader("PROXY UNKNOWN\r\n");
  ASSERT_EQ(h.state, ProxyHeader::kComplete);
  EXPECT_EQ(h.size, 15u);
}

TEST(ProxyProtocolTest, WhatIsNotAVersion2HeaderIsRefusedAtItsFirstWrongByte) {
  struct Case {
    std::string bytes;
    const char* why;
  };
  const Case cases[] = {
      {"\x16\x03\x01", "does not start with a PROXY protocol header"},  // bare TLS
      {"PROX!", "does not start with a PROXY protocol header"},
      {"PROXY TCP4 192.0.2.7 10.0.0.5 40001\r\n", "not \"PROXY TCP4|TCP6"},
      {"PROXY UDP4 192.0.2.7 10.0.0.5 1 2\r\n", "not \"PROXY TCP4|TCP6"},
      {"PROXY TCP4 192.0.2.7 2001:db8::5 1 2\r\n", "addresses are not IPv4"},
      {"PROXY TCP6 192.0.2.7 10.0.0.5 1 2\r\n", "addresses are not IPv6"},
      {"PROXY TCP4 192.0.2.7 10.0.0.5 65536 2\r\n", "ports are not 0-65535"},
      {"PROXY TCP4 192.0.2.7 10.0.0.5 1 -2\r\n", "ports are not 0-65535"},
      {"PROXY " + std::string(101, 'x'), "without its CRLF in 107 bytes"},
      {Header(0x11, 0x11, Ipv4Block("192.0.2.7", 1)), "version 1, not 2"},
      {Header(0x22, 0x11, Ipv4Block("192.0.2.7", 1)), "command 2 is neither LOCAL nor PROXY"},
      {Header(0x21, 0x41, Ipv4Block("192.0.2.7", 1)), "address family 4"},
      {Header(0x21, 0x12, Ipv4Block("192.0.2.7", 1)), "transport protocol 2 is not a stream"},
      {Header(0x21, 0x10, Ipv4Block("192.0.2.7", 1)), "a PROXY command over an unspecified"},
      {Header(0x21, 0x11, std::string(11, 'a')), "IPv4 addresses in 11 bytes, not 12"},
      {Header(0x21, 0x21, std::string(35, 'a')), "IPv6 addresses in 35 bytes, not 36"},
  };
  for (const Case& c : cases) {
    ProxyHeader h = ParseProxyHeader(c.bytes);
    ASSERT_EQ(h.state, ProxyHeader::kInvalid) << c.why;
    EXPECT_THAT(h.error.message(), HasSubstr("PROXY protocol: "));
    EXPECT_THAT(h.error.message(), HasSubstr(c.why));
  }
}

TEST(ProxyProtocolTest, AHeaderDeclaringMoreThanTheCapIsRefusedBeforeItArrives) {
  // The prefix alone, declaring 513 bytes to follow: refused without waiting for them.
  const std::string prefix = kSignature + "\x21\x11" + Be16(513);
  ProxyHeader h = ParseProxyHeader(prefix);
  ASSERT_EQ(h.state, ProxyHeader::kInvalid);
  EXPECT_THAT(h.error.message(), HasSubstr("header of 529 bytes, over 528"));
  // 512 is the most: accepted once whole.
  const std::string largest = Header(0x21, 0x11, Ipv4Block("192.0.2.7", 1) + std::string(500, 0));
  EXPECT_EQ(ParseProxyHeader(largest).state, ProxyHeader::kComplete);
  EXPECT_EQ(largest.size(), kMaxProxyHeaderBytes);
}

}  // namespace
}  // namespace hotfix::service
