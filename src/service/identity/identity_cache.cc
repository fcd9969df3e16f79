#include "service/identity/identity_cache.h"

#include <mutex>

namespace hotfix::service {

std::shared_ptr<const NodeIdentity> IdentityCache::Find(const ossl::Sha256Digest& digest,
                                                        TimePoint now, bool* fresh) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(digest);
  if (it == entries_.end()) return nullptr;
  *fresh = now <= it->second.until;
  return it->second.identity;
}

void IdentityCache::Insert(const ossl::Sha256Digest& digest, NodeIdentity identity, TimePoint until,
                           TimePoint now) {
  auto shared = std::make_shared<const NodeIdentity>(std::move(identity));
  std::unique_lock lock(mu_);
  if (entries_.count(digest) != 0) return;
  while (!by_expiry_.empty() && by_expiry_.begin()->first.first < now) {
    Erase(entries_.find(by_expiry_.begin()->second));
  }
  while (entries_.size() >= capacity_) Erase(entries_.find(by_age_.begin()->second));
  uint64_t seq = next_seq_++;
  entries_.emplace(digest, Entry{std::move(shared), until, seq});
  by_expiry_.emplace(std::make_pair(until, seq), digest);
  by_age_.emplace(seq, digest);
}

uint64_t IdentityCache::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

void IdentityCache::Erase(Map::iterator it) {
  by_expiry_.erase({it->second.until, it->second.seq});
  by_age_.erase(it->second.seq);
  entries_.erase(it);
  evictions_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace hotfix::service
