#include "service/transport/peer_counts.h"

#include <openssl/rand.h>

namespace hotfix::service {
namespace {

// FNV-1a over the address, from a random start: which shard an address lands in is not
// something a peer can aim for (and a shard is only a lock: entries never share a count).
size_t ShardIndex(uint64_t seed, std::string_view address, size_t shards) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : address) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<size_t>((h ^ (h >> 29)) % shards);
}

}  // namespace

PeerCounts::PeerCounts() {
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&seed_), sizeof seed_) != 1) seed_ = 0;
}

PeerCounts::Shard& PeerCounts::ShardFor(std::string_view address) {
  return shards_[ShardIndex(seed_, address, kShards)];
}

const PeerCounts::Shard& PeerCounts::ShardFor(std::string_view address) const {
  return shards_[ShardIndex(seed_, address, kShards)];
}

bool PeerCounts::Admit(std::string_view address, size_t max) {
  Shard& shard = ShardFor(address);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, added] = shard.open.try_emplace(std::string(address), 0);
  if (it->second >= max) {
    if (it->second == 0) shard.open.erase(it);  // max 0: nothing was open
    return false;
  }
  ++it->second;
  return true;
}

void PeerCounts::Release(std::string_view address) {
  Shard& shard = ShardFor(address);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.open.find(std::string(address));
  if (it == shard.open.end()) return;
  if (--it->second == 0) shard.open.erase(it);
}

size_t PeerCounts::Count(std::string_view address) const {
  const Shard& shard = ShardFor(address);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.open.find(std::string(address));
  return it == shard.open.end() ? 0 : it->second;
}

size_t PeerCounts::Addresses() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    n += shard.open.size();
  }
  return n;
}

}  // namespace hotfix::service
