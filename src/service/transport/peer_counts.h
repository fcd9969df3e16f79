// Open connections per source address, counted exactly: each address that has a connection
// open has an entry of its own, removed when its last connection closes, so memory follows the
// open connections (already capped) and no address shares a count with another. (Hashed
// buckets did: an attacker whose address collides with a node's filled the node's share.)
// Sharded by a hash from a random start (peer_counts.cc), a lock per
// shard; an accept or a close is one lock and one map operation. Thread-safe.
//
//   PeerCounts counts;
//   if (!counts.Admit(address, 512)) refuse();   // address: the IPv4 or IPv6 bytes
//   ... on close: counts.Release(address);
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hotfix::service {

class PeerCounts {
 public:
  PeerCounts();
  PeerCounts(const PeerCounts&) = delete;
  PeerCounts& operator=(const PeerCounts&) = delete;

  // Counts one more connection from `address`, unless it already has `max` (then false and
  // nothing counted).
  bool Admit(std::string_view address, size_t max);
  // One connection from `address` closed (it was admitted).
  void Release(std::string_view address);
  // Connections open from `address` now.
  size_t Count(std::string_view address) const;
  // Addresses with a connection open now.
  size_t Addresses() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, uint32_t> open;
  };
  Shard& ShardFor(std::string_view address);
  const Shard& ShardFor(std::string_view address) const;

  uint64_t seed_ = 0;
  std::array<Shard, kShards> shards_;
};

}  // namespace hotfix::service
