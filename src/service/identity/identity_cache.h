// Verified node identities by token digest, so a fleet of retrying nodes costs a lookup, not
// a signature verification. Lookups share a lock; inserts (after a verification, which costs
// far more) take it alone. Eviction: expired entries first, then the oldest. Bounded by its
// capacity whatever the callers send. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include "service/identity/node_identity.h"

namespace hotfix::service {

class IdentityCache {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  explicit IdentityCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The entry for `digest` if there is one; `fresh` says whether it is still usable at now.
  // Only a pointer is copied under the lock.
  std::shared_ptr<const NodeIdentity> Find(const ossl::Sha256Digest& digest, TimePoint now,
                                           bool* fresh) const;

  // Keeps `identity` until `until`. A digest already held keeps its entry (another thread
  // verified the same token). Entries expired at `now` go first, then the oldest, so that
  // the cache never holds more than its capacity.
  void Insert(const ossl::Sha256Digest& digest, NodeIdentity identity, TimePoint until,
              TimePoint now);

  uint64_t size() const;
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::shared_ptr<const NodeIdentity> identity;
    TimePoint until;
    uint64_t seq;  // insertion order, also the tie-break among equal expiries
  };
  using Map = std::unordered_map<ossl::Sha256Digest, Entry, ossl::Sha256DigestHash>;

  void Erase(Map::iterator it);

  const size_t capacity_;
  mutable std::shared_mutex mu_;
  Map entries_;
  std::map<std::pair<TimePoint, uint64_t>, ossl::Sha256Digest> by_expiry_;
  std::map<uint64_t, ossl::Sha256Digest> by_age_;
  uint64_t next_seq_ = 0;
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace hotfix::service
