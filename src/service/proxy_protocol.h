// The PROXY protocol, version 2 (the binary header HAProxy's `send-proxy-v2`, nginx's
// `proxy_protocol on` and Envoy's `proxy_protocol` transport socket put before a connection's
// first byte): which address the proxy accepted the connection from. The spec is HAProxy's
// doc/proxy-protocol.txt, section 2.2. I/O-free: the listener reads no more than `size` says
// the header still needs, so the TLS handshake after it is untouched.
//
// Hand-written because no library Debian packages parses it (HAProxy, nginx and Envoy each
// carry their own); it reads a fixed 16-byte prefix, a length and two addresses, and is
// fuzzed (tests/fuzz/proxy_protocol_fuzz.cc).
//
//   ProxyHeader h = ParseProxyHeader(read_so_far);
//   if (h.state == ProxyHeader::kNeedMore) read h.size - read_so_far.size() more bytes;
//   if (h.state == ProxyHeader::kInvalid) refuse (h.error says why);
//   if (h.state == ProxyHeader::kComplete && h.source) the node's address is *h.source
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace hotfix::service {

// The longest header accepted: the 16-byte prefix and 512 bytes after it, room for two IPv6
// addresses (36 bytes) and the TLVs proxies add (ALPN, authority, unique ID, TLS details).
// The protocol allows 65,535; a peer that declares more is refused before it sends them.
inline constexpr size_t kMaxProxyHeaderBytes = 16 + 512;

struct ProxyHeader {
  enum State { kNeedMore, kComplete, kInvalid };
  State state = kNeedMore;
  // kComplete: the header's length, to consume before the connection's own bytes.
  // kNeedMore: the bytes the header needs at least: 16 until its fixed prefix is in, then its
  // whole length.
  size_t size = 0;
  // kComplete: the address the proxy accepted from (PROXY over TCP/IPv4 or IPv6). Empty for
  // LOCAL (the proxy's own connection, e.g. its health check) and for an unspecified or
  // UNIX-socket family: the connection's own peer stands.
  std::optional<sockaddr_storage> source;
  Status error;  // kInvalid: what was wrong, naming the PROXY protocol
};

// Reads the header at the start of `bytes` (all the connection has sent so far).
ProxyHeader ParseProxyHeader(std::string_view bytes);

}  // namespace hotfix::service
