// Source addresses whose callers were refused (their identity: UNAUTHENTICATED or
// PERMISSION_DENIED) too often lately, so their next connections can be closed before the TLS
// handshake: a refused call already costs little of what the service decides (a hash), but
// its handshake is most of what is left (docs/BENCHMARKS.md, "refused calls"). The server uses
// it only with --proxy-protocol, where the address is the node's; without the header every
// connection is the proxy's and one bad node would shed the fleet.
//
// Counting is per exact address, in fixed windows: an address's first refusal opens a window
// of `window`; once it holds max_refusals refusals, the address is shed until the window ends,
// and then it starts afresh. So a peer that keeps failing gets max_refusals full answers per
// window and a closed connection for the rest, and a node that shares its address (a NAT)
// gets in again within one window of the refusals stopping.
//
// A fixed table of slots (the address chooses one; a newer address takes the slot of an
// older one), so its memory is fixed whatever peers send. Keys are whole addresses, never
// hashed buckets: an attacker with many addresses (an IPv6 prefix) can only push refused
// addresses out, which sheds less, never an innocent address that shares a bucket with it.
// Thread-safe (sharded locks); a check is one lock and one comparison.
//
//   RefusedPeers refused({.max_refusals = 10, .window = 10s});
//   if (refused.Shed(address, now)) close();      // after the PROXY header
//   ... the caller was refused: refused.Record(address, now);
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace hotfix::service {

struct RefusedPeerLimit {
  uint32_t max_refusals = 10;  // 0: never shed
  std::chrono::milliseconds window{10000};
  size_t slots = 4096;  // addresses tracked at once
};

class RefusedPeers {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit RefusedPeers(RefusedPeerLimit limit);

  // A caller from `address` (an IPv4 or IPv6 address's bytes, at most 16) was refused.
  void Record(std::string_view address, TimePoint now);
  // True while `address` has max_refusals refusals in its current window.
  bool Shed(std::string_view address, TimePoint now) const;

 private:
  struct Slot {
    std::array<char, 16> address{};
    uint8_t size = 0;  // 0: empty
    TimePoint window_end;
    uint32_t refusals = 0;
  };
  static constexpr size_t kShards = 16;

  size_t Index(std::string_view address) const;
  static bool Holds(const Slot& slot, std::string_view address);

  const RefusedPeerLimit limit_;
  std::vector<Slot> slots_;
  mutable std::array<std::mutex, kShards> mu_;  // slot i is guarded by mu_[i % kShards]
};

}  // namespace hotfix::service
