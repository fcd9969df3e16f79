// The first bytes of every connection to a listener with --proxy-protocol: the PROXY protocol
// header, version 1 or 2 (src/service/transport/proxy_protocol.cc, ParseProxyHeader), read before
// TLS from whoever connects.
//
// Input: the bytes a peer sent first.
//
// Properties:
// - a complete header is 15 ("PROXY UNKNOWN\r\n") to kMaxProxyHeaderBytes bytes, no more than were
// given, and its
//   source, when there is one, is an IPv4 or IPv6 address; an Azure link ID comes only with a
//   source, and from the header's own bytes;
// - the answer does not depend on what follows a complete header, and every shorter prefix of
//   it needs more (a header is never judged before it is whole);
// - needing more, it asks for more than it has and never past the cap (a reader that takes
//   what it asks for never reads into the TLS handshake);
// - whatever is refused carries a message naming the protocol, and every longer input is
//   refused too (once refused, more bytes cannot make it acceptable).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "service/transport/proxy_protocol.h"

using namespace hotfix::service;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const ProxyHeader h = ParseProxyHeader(bytes);
  switch (h.state) {
    case ProxyHeader::kComplete: {
      FUZZ_CHECK(h.size >= 15 && h.size <= kMaxProxyHeaderBytes && h.size <= size);
      if (h.source) {
        FUZZ_CHECK(h.source->ss_family == AF_INET || h.source->ss_family == AF_INET6);
      }
      const ProxyHeader alone = ParseProxyHeader(bytes.substr(0, h.size));
      FUZZ_CHECK(alone.state == ProxyHeader::kComplete && alone.size == h.size);
      FUZZ_CHECK(alone.source.has_value() == h.source.has_value());
      // The link ID is the header's own: what follows it cannot make or change one.
      FUZZ_CHECK(alone.azure_link_id == h.azure_link_id);
      if (h.azure_link_id) FUZZ_CHECK(h.source.has_value());
      for (size_t n = 0; n < h.size; ++n) {
        FUZZ_CHECK(ParseProxyHeader(bytes.substr(0, n)).state == ProxyHeader::kNeedMore);
      }
      break;
    }
    case ProxyHeader::kInvalid: {
      FUZZ_CHECK(!h.error.ok());
      FUZZ_CHECK(h.error.message().find("PROXY protocol") != std::string::npos);
      const std::string longer = std::string(bytes) + std::string(600, '\x7f');
      FUZZ_CHECK(ParseProxyHeader(longer).state == ProxyHeader::kInvalid);
      break;
    }
    case ProxyHeader::kNeedMore:
      FUZZ_CHECK(size < h.size && h.size <= kMaxProxyHeaderBytes);
      break;
  }
  return 0;
}
