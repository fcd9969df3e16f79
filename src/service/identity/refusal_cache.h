// Refusals by SHA-256, for a short while: the same bad input again is refused for the price of its
// hash. The authenticator keeps refused tokens in one (a repeated bad token, about 30 bytes once
// HPACK has it, costs a SHA-256 and a lookup, not a base64 decode, a PKCS#7 parse and a chain check
// each time); the signature layer keeps signer certificates whose chain failed in another
// (signed_document.h). A fixed table of slots, each digest choosing one (a newer refusal takes the
// slot of an older one), so its size is fixed whatever peers send; sharded locks. Thread-safe.
//
//   RefusalCache<Refusal> refusals(4096, std::chrono::seconds(60));
//   if (std::optional<Refusal> r = refusals.Find(digest, now)) return *r;  // the same answer
//   ... check; refused: refusals.Insert(digest, refusal, now);
#pragma once

#include <array>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "common/openssl.h"

namespace hotfix::service {

template <typename Value>
class RefusalCache {
 public:
  using Key = ossl::Sha256Digest;
  using TimePoint = std::chrono::system_clock::time_point;

  // slots: at least 1; ttl: how long a refusal is repeated without another check.
  RefusalCache(size_t slots, std::chrono::seconds ttl)
      : ttl_(ttl), slots_(slots == 0 ? 1 : slots) {}

  // The refusal kept for this digest, if it is younger than the ttl.
  std::optional<Value> Find(const Key& digest, TimePoint now) const {
    const size_t i = Index(digest);
    std::lock_guard<std::mutex> lock(mu_[i % kShards]);
    const Slot& slot = slots_[i];
    if (!slot.used || slot.digest != digest || now >= slot.until) return std::nullopt;
    return slot.value;
  }

  // Keeps `value` until now + ttl, in the slot of whatever this digest's slot held.
  void Insert(const Key& digest, Value value, TimePoint now) {
    const size_t i = Index(digest);
    std::lock_guard<std::mutex> lock(mu_[i % kShards]);
    slots_[i] = Slot{digest, true, now + ttl_, std::move(value)};
  }

 private:
  struct Slot {
    Key digest{};
    bool used = false;
    TimePoint until;
    Value value{};
  };
  static constexpr size_t kShards = 16;

  size_t Index(const Key& digest) const {
    // A SHA-256 is uniform: its first bytes are as good an index as any hash of them.
    uint64_t head = 0;
    std::memcpy(&head, digest.data(), sizeof head);
    return static_cast<size_t>(head % slots_.size());
  }

  const std::chrono::seconds ttl_;
  std::vector<Slot> slots_;
  mutable std::array<std::mutex, kShards> mu_;  // slot i is guarded by mu_[i % kShards]
};

}  // namespace hotfix::service
