// Per-node request rate limiting: a token bucket per key (the node's vmId), refilled at a
// configured rate with a burst of one second's worth. Idle buckets are forgotten.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

namespace hotfix::service {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // True if key may make a request now (and takes a token).
  virtual bool Allow(std::string_view key) = 0;
};

// rate_per_second <= 0: unlimited. Thread-safe.
std::unique_ptr<RateLimiter> NewTokenBucketLimiter(double rate_per_second,
                                                   size_t max_tracked_keys = 100000);

}  // namespace hotfix::service
