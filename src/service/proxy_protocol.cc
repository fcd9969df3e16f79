#include "service/proxy_protocol.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace hotfix::service {
namespace {

// doc/proxy-protocol.txt, 2.2: the signature, then version and command, family and
// protocol, and the length of what follows, in network order.
constexpr char kSignature[] = "\r\n\r\n\0\r\nQUIT\n";
constexpr size_t kSignatureBytes = 12;
constexpr size_t kPrefixBytes = 16;
constexpr uint8_t kCommandLocal = 0x0;
constexpr uint8_t kCommandProxy = 0x1;
constexpr uint8_t kFamilyUnspec = 0x0;
constexpr uint8_t kFamilyInet = 0x1;
constexpr uint8_t kFamilyInet6 = 0x2;
constexpr uint8_t kFamilyUnix = 0x3;
constexpr uint8_t kProtocolUnspec = 0x0;
constexpr uint8_t kProtocolStream = 0x1;
// Source address, destination address, source port, destination port.
constexpr size_t kInetAddressBytes = 4 + 4 + 2 + 2;
constexpr size_t kInet6AddressBytes = 16 + 16 + 2 + 2;

ProxyHeader Invalid(std::string why) {
  ProxyHeader h;
  h.state = ProxyHeader::kInvalid;
  h.error = Status::InvalidArgument("PROXY protocol: " + why);
  return h;
}

uint8_t Byte(std::string_view bytes, size_t at) { return static_cast<uint8_t>(bytes[at]); }

uint16_t Uint16(std::string_view bytes, size_t at) {
  return static_cast<uint16_t>((Byte(bytes, at) << 8) | Byte(bytes, at + 1));
}

}  // namespace

ProxyHeader ParseProxyHeader(std::string_view bytes) {
  const size_t seen = std::min(bytes.size(), kSignatureBytes);
  if (std::memcmp(bytes.data(), kSignature, seen) != 0) {
    constexpr std::string_view kVersion1 = "PROXY ";
    const size_t n = std::min(bytes.size(), kVersion1.size());
    if (bytes.substr(0, n) == kVersion1.substr(0, n)) {
      return Invalid("a version 1 (text) header; only version 2 is accepted");
    }
    return Invalid("the connection does not start with a version 2 header");
  }
  ProxyHeader h;
  h.size = kPrefixBytes;
  if (bytes.size() < kPrefixBytes) return h;
  const uint8_t version = Byte(bytes, 12) >> 4;
  const uint8_t command = Byte(bytes, 12) & 0x0f;
  const uint8_t family = Byte(bytes, 13) >> 4;
  const uint8_t protocol = Byte(bytes, 13) & 0x0f;
  const size_t length = Uint16(bytes, 14);
  if (version != 2) return Invalid("version " + std::to_string(version) + ", not 2");
  if (command != kCommandLocal && command != kCommandProxy) {
    return Invalid("command " + std::to_string(command) + " is neither LOCAL nor PROXY");
  }
  if (family > kFamilyUnix) return Invalid("address family " + std::to_string(family));
  if (protocol != kProtocolUnspec && protocol != kProtocolStream) {
    return Invalid("transport protocol " + std::to_string(protocol) + " is not a stream");
  }
  if (kPrefixBytes + length > kMaxProxyHeaderBytes) {
    return Invalid("header of " + std::to_string(kPrefixBytes + length) + " bytes, over " +
                   std::to_string(kMaxProxyHeaderBytes));
  }
  h.size = kPrefixBytes + length;
  if (bytes.size() < h.size) return h;
  h.state = ProxyHeader::kComplete;
  // LOCAL: the proxy speaks for itself. UNSPEC and UNIX: no address a per-peer limit can use.
  if (command == kCommandLocal || family == kFamilyUnspec || family == kFamilyUnix) return h;
  if (protocol != kProtocolStream) return Invalid("a PROXY command over an unspecified protocol");
  const std::string_view block = bytes.substr(kPrefixBytes, length);
  sockaddr_storage source{};
  if (family == kFamilyInet) {
    if (block.size() < kInetAddressBytes) {
      return Invalid("IPv4 addresses in " + std::to_string(block.size()) + " bytes, not 12");
    }
    auto* in = reinterpret_cast<sockaddr_in*>(&source);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, block.data(), 4);
    in->sin_port = htons(Uint16(block, 8));
  } else {
    if (block.size() < kInet6AddressBytes) {
      return Invalid("IPv6 addresses in " + std::to_string(block.size()) + " bytes, not 36");
    }
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&source);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, block.data(), 16);
    in6->sin6_port = htons(Uint16(block, 32));
  }
  h.source = source;  // what follows the addresses (TLVs) is skipped: nothing here needs it
  return h;
}

}  // namespace hotfix::service
