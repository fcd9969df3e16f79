// Source addresses whose peers were at fault too often lately, so most of their next
// connections can be closed before the TLS handshake: a refused call already costs little of
// what the service decides (a hash), but its handshake is most of what is left
// (docs/history/BENCHMARKS.md, "refused calls"). The server uses it only with --proxy-protocol,
// where the address is the node's; without the header every connection is the proxy's and one bad
// node would shed the fleet.
//
// Only evidence that is the peer's own counts (the server decides: grpc_server.cc,
// Loop::Close): a refusal for a missing, malformed or forged document
// (GrpcReply::caller_at_fault), a TLS handshake that failed or ran out, a connection with
// nothing answered by the first-request timeout. Never what a real node behind the same
// address (a NAT: a cluster's egress address) may be refused for: an expired document, a
// subscription off the allow-list.
//
// Counting is per exact address, in fixed windows: an address's first fault opens a window of
// `window`; once it holds max_refusals, the address is shed until the window ends, and then
// it starts afresh. While shed, one connection in admit_one_in is still let in, so a node that
// shares the address keeps a share of its calls, and the faults of those let in keep the
// address shed. So a peer that keeps failing gets max_refusals full answers per window and
// one in admit_one_in after that.
//
// A fixed table of slots (the address chooses one; a newer address takes the slot of an
// older one), so its memory is fixed whatever peers send. Keys are whole addresses, never
// hashed buckets: an attacker with many addresses (an IPv6 prefix) can only push refused
// addresses out, which sheds less, never an innocent address that shares a bucket with it.
// Thread-safe (sharded locks); a check is one lock and one comparison.
//
//   RefusedPeers refused({.max_refusals = 30, .window = 10s});
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
  uint32_t max_refusals = 30;  // 0: never shed
  std::chrono::milliseconds window{10000};
  size_t slots = 4096;  // addresses tracked at once
  // While shed, every admit_one_in-th connection is let in anyway (1: none shed).
  uint32_t admit_one_in = 4;
};

class RefusedPeers {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit RefusedPeers(RefusedPeerLimit limit);

  // A peer at `address` (an IPv4 or IPv6 address's bytes, or another key of at most 16
  // bytes) was at fault.
  void Record(std::string_view address, TimePoint now);
  // A connection from `address` arrived: true to close it. While `address` has max_refusals
  // in its current window, true for all but every admit_one_in-th arrival.
  bool Shed(std::string_view address, TimePoint now);

 private:
  struct Slot {
    std::array<char, 16> address{};
    uint8_t size = 0;  // 0: empty
    TimePoint window_end;
    uint32_t refusals = 0;
    uint32_t shed_arrivals = 0;  // connections that arrived while shed, this window
  };
  static constexpr size_t kShards = 16;

  size_t Index(std::string_view address) const;
  static bool Holds(const Slot& slot, std::string_view address);

  const RefusedPeerLimit limit_;
  std::vector<Slot> slots_;
  mutable std::array<std::mutex, kShards> mu_;  // slot i is guarded by mu_[i % kShards]
};

}  // namespace hotfix::service
