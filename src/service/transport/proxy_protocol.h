// The PROXY protocol: the header a proxy puts before a connection's first byte saying which
// address it accepted the connection from. Version 2, binary (HAProxy's `send-proxy-v2`,
// Envoy's `proxy_protocol` transport socket), and version 1, a text line (nginx's
// `proxy_protocol on`, the only one nginx sends); the spec, HAProxy's doc/proxy-protocol.txt,
// asks a receiver to take both. I/O-free: the listener reads no more than `size` says
// the header still needs, so the TLS handshake after it is untouched.
//
// Hand-written because no library Debian packages parses it (HAProxy, nginx and Envoy each
// carry their own); it reads a fixed 16-byte prefix, a length and two addresses, and is
// fuzzed (tests/fuzz/proxy_protocol_fuzz.cc).
//
//   ProxyHeader h = ParseProxyHeader(read_so_far);
//   if (h.state == ProxyHeader::kNeedMore) read h.size - read_so_far.size() more bytes;
//   if (h.state == ProxyHeader::kInvalid) refuse (h.error says why);
//   if (h.state == ProxyHeader::kComplete && h.source) the node's address is *h.source,
//                                                       and the one it dialed *h.destination
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace hotfix::service {

// The longest version 2 header accepted (a version 1 line is at most 107 bytes, by the spec):
// the 16-byte prefix and 512 bytes after it, room for two IPv6
// addresses (36 bytes) and the TLVs proxies add (ALPN, authority, unique ID, TLS details).
// The protocol allows 65,535; a peer that declares more is refused before it sends them.
inline constexpr size_t kMaxProxyHeaderBytes = 16 + 512;

struct ProxyHeader {
  enum State { kNeedMore, kComplete, kInvalid };
  State state = kNeedMore;
  // kComplete: the header's length, to consume before the connection's own bytes.
  // kNeedMore: the bytes the header needs at least: 6 until the version shows, then for version
  // 2 its 16-byte prefix and then its whole length, for version 1 one more byte (every byte
  // before its CRLF is the line's).
  size_t size = 0;
  // kComplete: the address the proxy accepted from (PROXY over TCP/IPv4 or IPv6). Empty for
  // LOCAL (the proxy's own connection, e.g. its health check) and for an unspecified or
  // UNIX-socket family: the connection's own peer stands.
  std::optional<sockaddr_storage> source;
  // kComplete, with `source`: the address the proxy accepted the connection on, the one the
  // client dialed (a node that dialed its apiserver's IP sends no server name: the service
  // picks its certificate by this address, tls_server_context.h).
  std::optional<sockaddr_storage> destination;
  // kComplete, version 2: the link ID of the Azure Private Endpoint the connection came
  // through (the TLV PP2_TYPE_AZURE, 0xEE, subtype 0x01, a little-endian uint32, which Azure's
  // Private Link service adds). Many endpoints reach a service through one NAT address; the
  // link ID tells them apart, so the per-peer limits key on it where it is present.
  std::optional<uint32_t> azure_link_id;
  Status error;  // kInvalid: what was wrong, naming the PROXY protocol
};

// Reads the header at the start of `bytes` (all the connection has sent so far).
ProxyHeader ParseProxyHeader(std::string_view bytes);

}  // namespace hotfix::service
