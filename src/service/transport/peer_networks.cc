#include "service/transport/peer_networks.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace hotfix::service {
namespace {

bool Matches(const std::array<uint8_t, 16>& base, int bits, const uint8_t* address) {
  const int whole = bits / 8;
  if (std::memcmp(base.data(), address, static_cast<size_t>(whole)) != 0) return false;
  if (bits % 8 == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff00 >> (bits % 8));
  return (base[whole] & mask) == (address[whole] & mask);
}

}  // namespace

StatusOr<PeerNetworks> PeerNetworks::Parse(const std::vector<std::string>& cidrs,
                                           const std::string& flag) {
  PeerNetworks out;
  for (const std::string& entry : cidrs) {
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument(flag + " \"" + entry.substr(0, 64) + "\": " + why);
    };
    const size_t slash = entry.find('/');
    const std::string address = entry.substr(0, slash);
    Network n;
    n.text = entry;
    if (inet_pton(AF_INET, address.c_str(), n.base.data()) == 1) {
      n.v4 = true;
    } else if (inet_pton(AF_INET6, address.c_str(), n.base.data()) != 1) {
      return bad("want ADDRESS/BITS, e.g. 10.0.0.0/8 or fd00::/8");
    }
    const int max_bits = n.v4 ? 32 : 128;
    n.bits = max_bits;
    if (slash != std::string::npos) {
      const char* first = entry.data() + slash + 1;
      const char* last = entry.data() + entry.size();
      auto [end, ec] = std::from_chars(first, last, n.bits);
      if (first == last || ec != std::errc() || end != last || n.bits < 0 || n.bits > max_bits) {
        return bad("the prefix length must be 0 to " + std::to_string(max_bits));
      }
    }
    std::array<uint8_t, 16> masked{};
    for (int i = 0; i < n.bits; ++i) masked[i / 8] |= n.base[i / 8] & (0x80 >> (i % 8));
    if (masked != n.base) return bad("address bits set past the prefix length");
    out.networks_.push_back(std::move(n));
  }
  if (out.networks_.empty()) return Status::InvalidArgument(flag + ": give at least one network");
  return out;
}

bool PeerNetworks::Contains(const sockaddr_storage& peer) const {
  const uint8_t* address = nullptr;
  bool v4 = false;
  if (peer.ss_family == AF_INET) {
    address =
        reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in&>(peer).sin_addr);
    v4 = true;
  } else if (peer.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
    address = reinterpret_cast<const uint8_t*>(&in6);
    if (IN6_IS_ADDR_V4MAPPED(&in6)) {
      address += 12;
      v4 = true;
    }
  } else {
    return false;
  }
  for (const Network& n : networks_) {
    if (n.v4 == v4 && Matches(n.base, n.bits, address)) return true;
  }
  return false;
}

std::string PeerNetworks::ToString() const {
  std::string out;
  for (const Network& n : networks_) out += (out.empty() ? "" : ",") + n.text;
  return out;
}

}  // namespace hotfix::service
