// Networks given as CIDRs ("10.0.0.0/8", "fd00::/8", "192.0.2.7/32"), and whether a peer's
// address is in one: which TCP peers a listener believes a PROXY header from
// (--proxy-protocol-from). An IPv4-mapped IPv6 peer (::ffff:a.b.c.d, from a dual-stack
// socket) is its IPv4 address.
//
//   StatusOr<PeerNetworks> from = PeerNetworks::Parse({"10.0.0.0/8", "fd00::/8"}, "--flag");
//   if (!from->Contains(peer_sockaddr)) refuse();
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace hotfix::service {

class PeerNetworks {
 public:
  // Each entry ADDRESS/BITS; a bare address is that address alone. InvalidArgument naming
  // `flag` and the entry otherwise, for an empty list, or for host bits set past the prefix
  // (10.1.2.3/8: a typo for /32, or for 10.0.0.0/8?).
  static StatusOr<PeerNetworks> Parse(const std::vector<std::string>& cidrs,
                                      const std::string& flag);

  bool Contains(const sockaddr_storage& peer) const;
  // "10.0.0.0/8,fd00::/8": for the start-up line.
  std::string ToString() const;

 private:
  struct Network {
    bool v4 = false;
    std::array<uint8_t, 16> base{};  // IPv4: the first 4
    int bits = 0;
    std::string text;
  };
  std::vector<Network> networks_;
};

}  // namespace hotfix::service
