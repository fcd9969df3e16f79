#include "service/transport/proxy_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace hotfix::service {
namespace {

// doc/proxy-protocol.txt, 2.2: the signature, then version and command, family and
// protocol, and the length of what follows, in network order.
constexpr std::string_view kSignature("\r\n\r\n\0\r\nQUIT\n", 12);
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

// doc/proxy-protocol.txt, 2.2.7 (types 0xE0 to 0xEF are for custom use); Azure's Private Link
// service: type 0xEE, then a subtype byte, 0x01 for the private endpoint's link ID.
constexpr uint8_t kTlvTypeAzure = 0xEE;
constexpr uint8_t kAzureSubtypeLinkId = 0x01;
constexpr size_t kTlvHeaderBytes = 3;  // type, then a 16-bit length

constexpr std::string_view kVersion1Tag = "PROXY ";
constexpr size_t kMaxVersion1Bytes = 107;

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

// Whether `bytes` (maybe fewer) begin as `prefix` does.
bool BeginsAs(std::string_view bytes, std::string_view prefix) {
  const size_t n = std::min(bytes.size(), prefix.size());
  return bytes.substr(0, n) == prefix.substr(0, n);
}

ProxyHeader NeedMore(size_t size) {
  ProxyHeader h;
  h.size = size;
  return h;
}

// An IPv4 (4 bytes) or IPv6 (16 bytes) address in network order, and a port.
sockaddr_storage SocketAddress(std::string_view address, uint16_t port) {
  sockaddr_storage out{};
  if (address.size() == sizeof(in_addr)) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, address.data(), address.size());
    in->sin_port = htons(port);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, address.data(), sizeof(in6_addr));
    in6->sin6_port = htons(port);
  }
  return out;
}

// The Azure link ID among the TLVs that follow the addresses, if one is there. TLVs that do not
// fit are not read past (nothing here depends on the others; a short one ends the walk).
std::optional<uint32_t> AzureLinkId(std::string_view tlvs) {
  while (tlvs.size() >= kTlvHeaderBytes) {
    const uint8_t type = Byte(tlvs, 0);
    const size_t length = Uint16(tlvs, 1);
    if (tlvs.size() - kTlvHeaderBytes < length) return std::nullopt;
    const std::string_view value = tlvs.substr(kTlvHeaderBytes, length);
    if (type == kTlvTypeAzure && value.size() == 5 && Byte(value, 0) == kAzureSubtypeLinkId) {
      return static_cast<uint32_t>(Byte(value, 1)) | static_cast<uint32_t>(Byte(value, 2)) << 8 |
             static_cast<uint32_t>(Byte(value, 3)) << 16 |
             static_cast<uint32_t>(Byte(value, 4)) << 24;
    }
    tlvs.remove_prefix(kTlvHeaderBytes + length);
  }
  return std::nullopt;
}

// 1-5 digits, at most 65535.
std::optional<uint16_t> ParsePort(std::string_view text) {
  uint32_t value = 0;
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (text.size() > 5 || ec != std::errc() || stop != end || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

// doc/proxy-protocol.txt, 2.1: "PROXY TCP4|TCP6 SRC DST SRCPORT DSTPORT\r\n", or
// "PROXY UNKNOWN" and anything up to the CRLF; 107 bytes at most. Every byte before the CRLF
// is the header's, so a reader may take one more at a time without reading past it.
ProxyHeader ParseVersion1(std::string_view bytes) {
  if (bytes.size() < kVersion1Tag.size()) return NeedMore(kVersion1Tag.size());
  const size_t end = bytes.substr(0, kMaxVersion1Bytes).find("\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() >= kMaxVersion1Bytes) {
      return Invalid("a version 1 line without its CRLF in " + std::to_string(kMaxVersion1Bytes) +
                     " bytes");
    }
    return NeedMore(bytes.size() + 1);
  }
  std::vector<std::string> words;
  for (std::string_view rest = bytes.substr(0, end);;) {
    const size_t space = rest.find(' ');
    words.emplace_back(rest.substr(0, space));
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
  }
  ProxyHeader h;
  h.state = ProxyHeader::kComplete;
  h.size = end + 2;
  if (words.size() >= 2 && words[1] == "UNKNOWN") return h;  // the proxy's own connection
  if (words.size() != 6 || (words[1] != "TCP4" && words[1] != "TCP6")) {
    return Invalid("a version 1 line that is not \"PROXY TCP4|TCP6 SRC DST SRCPORT DSTPORT\"");
  }
  const int family = words[1] == "TCP4" ? AF_INET : AF_INET6;
  std::array<unsigned char, sizeof(in6_addr)> source{}, destination{};
  if (inet_pton(family, words[2].c_str(), source.data()) != 1 ||
      inet_pton(family, words[3].c_str(), destination.data()) != 1) {
    return Invalid(std::string("a version 1 line whose addresses are not ") +
                   (family == AF_INET ? "IPv4" : "IPv6"));
  }
  const std::optional<uint16_t> port = ParsePort(words[4]);
  const std::optional<uint16_t> destination_port = ParsePort(words[5]);
  if (!port || !destination_port) {
    return Invalid("a version 1 line whose ports are not 0-65535");
  }
  const size_t address_bytes = family == AF_INET ? sizeof(in_addr) : sizeof(in6_addr);
  h.source = SocketAddress(
      std::string_view(reinterpret_cast<const char*>(source.data()), address_bytes), *port);
  h.destination = SocketAddress(
      std::string_view(reinterpret_cast<const char*>(destination.data()), address_bytes),
      *destination_port);
  return h;
}

ProxyHeader ParseVersion2(std::string_view bytes) {
  if (bytes.size() < kPrefixBytes) return NeedMore(kPrefixBytes);
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
  ProxyHeader h = NeedMore(kPrefixBytes + length);
  if (bytes.size() < h.size) return h;
  h.state = ProxyHeader::kComplete;
  // LOCAL: the proxy speaks for itself. UNSPEC and UNIX: no address a per-peer limit can use.
  if (command == kCommandLocal || family == kFamilyUnspec || family == kFamilyUnix) return h;
  if (protocol != kProtocolStream) return Invalid("a PROXY command over an unspecified protocol");
  const std::string_view block = bytes.substr(kPrefixBytes, length);
  // Of the TLVs after the addresses, only Azure's link ID is read.
  if (family == kFamilyInet) {
    if (block.size() < kInetAddressBytes) {
      return Invalid("IPv4 addresses in " + std::to_string(block.size()) + " bytes, not 12");
    }
    h.source = SocketAddress(block.substr(0, 4), Uint16(block, 8));
    h.destination = SocketAddress(block.substr(4, 4), Uint16(block, 10));
    h.azure_link_id = AzureLinkId(block.substr(kInetAddressBytes));
  } else if (family == kFamilyInet6) {
    if (block.size() < kInet6AddressBytes) {
      return Invalid("IPv6 addresses in " + std::to_string(block.size()) + " bytes, not 36");
    }
    h.source = SocketAddress(block.substr(0, 16), Uint16(block, 32));
    h.destination = SocketAddress(block.substr(16, 16), Uint16(block, 34));
    h.azure_link_id = AzureLinkId(block.substr(kInet6AddressBytes));
  }
  return h;
}

}  // namespace

ProxyHeader ParseProxyHeader(std::string_view bytes) {
  // The first bytes tell the version; read no more than either needs to tell.
  if (bytes.empty()) return NeedMore(kVersion1Tag.size());
  if (BeginsAs(bytes, kVersion1Tag)) return ParseVersion1(bytes);
  if (!BeginsAs(bytes, kSignature)) {
    return Invalid("the connection does not start with a PROXY protocol header");
  }
  return ParseVersion2(bytes);
}

}  // namespace hotfix::service
