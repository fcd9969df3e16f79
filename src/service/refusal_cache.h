// Refused tokens by digest, for a short while: a peer that repeats a bad token (HPACK makes a
// repeat about 30 bytes) costs a SHA-256 and a lookup, not a base64 decode, a PKCS#7 parse and
// a chain check each time. A fixed table of slots, each token's digest choosing one (a newer
// refusal takes the slot of an older one), so its memory is fixed whatever peers send;
// sharded locks. Thread-safe.
//
//   RefusalCache refusals(4096, std::chrono::seconds(60));
//   if (auto r = refusals.Find(digest, now)) return *r;      // the same failure and message
//   ... verify; refused: refusals.Insert(digest, result, now);
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <vector>

#include "service/identity_cache.h"
#include "service/node_identity.h"

namespace hotfix::service {

class RefusalCache {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  // slots: at least 1; ttl: how long a refusal is repeated without another check.
  RefusalCache(size_t slots, std::chrono::seconds ttl);

  // The refusal kept for this digest, if it is younger than the ttl.
  std::optional<AuthResult> Find(const Digest& digest, TimePoint now) const;
  // Keeps a refusal (result.ok() is false) until now + ttl.
  void Insert(const Digest& digest, const AuthResult& result, TimePoint now);

  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    Digest digest{};
    bool used = false;
    TimePoint until;
    IdentityFailure failure = IdentityFailure::kMalformed;
    Status error;
  };
  static constexpr size_t kShards = 16;
  size_t Index(const Digest& digest) const;

  const std::chrono::seconds ttl_;
  std::vector<Slot> slots_;
  mutable std::array<std::mutex, kShards> mu_;  // slot i is guarded by mu_[i % kShards]
  mutable std::atomic<uint64_t> hits_{0};
};

}  // namespace hotfix::service
