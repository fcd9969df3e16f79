#include "service/refusal_cache.h"

#include <cstring>

namespace hotfix::service {

RefusalCache::RefusalCache(size_t slots, std::chrono::seconds ttl)
    : ttl_(ttl), slots_(slots == 0 ? 1 : slots) {}

size_t RefusalCache::Index(const Digest& digest) const {
  // A SHA-256 is uniform: its first bytes are as good an index as any hash of them.
  uint64_t head = 0;
  std::memcpy(&head, digest.data(), sizeof head);
  return static_cast<size_t>(head % slots_.size());
}

std::optional<AuthResult> RefusalCache::Find(const Digest& digest, TimePoint now) const {
  const size_t i = Index(digest);
  std::lock_guard<std::mutex> lock(mu_[i % kShards]);
  const Slot& slot = slots_[i];
  if (!slot.used || slot.digest != digest || now >= slot.until) return std::nullopt;
  hits_.fetch_add(1, std::memory_order_relaxed);
  AuthResult result;
  result.failure = slot.failure;
  result.error = slot.error;
  return result;
}

void RefusalCache::Insert(const Digest& digest, const AuthResult& result, TimePoint now) {
  if (result.ok()) return;
  const size_t i = Index(digest);
  std::lock_guard<std::mutex> lock(mu_[i % kShards]);
  Slot& slot = slots_[i];
  slot.digest = digest;
  slot.used = true;
  slot.until = now + ttl_;
  slot.failure = result.failure;
  slot.error = result.error;
}

}  // namespace hotfix::service
