// Per-node request rate limiting: a token bucket per key (the node's vmId), refilled at a
// configured rate with a burst of one second's worth. Idle buckets are forgotten.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hotfix::service {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // True if key may make a request now (and takes a token).
  virtual bool Allow(std::string_view key) = 0;
  // Keys with a bucket now: lp_rate_limiter_tracked_nodes (0 for limiters that track none).
  virtual size_t tracked_keys() const { return 0; }
};

// rate_per_second <= 0 (or not finite): unlimited. Thread-safe; Allow() is O(1) amortised under one
// mutex. A bucket idle long enough to have refilled is forgotten (a new one would be the same);
// beyond max_tracked_keys so is the least recently used key (a fresh burst should it return).
std::unique_ptr<RateLimiter> NewTokenBucketLimiter(double rate_per_second,
                                                   size_t max_tracked_keys = 100000);

// The same with the time taken from `now` (a fake clock in tests). A clock that steps back
// refills nothing and takes nothing away.
using SteadyNow = std::function<std::chrono::steady_clock::time_point()>;
std::unique_ptr<RateLimiter> NewTokenBucketLimiterWithClock(double rate_per_second,
                                                            size_t max_tracked_keys, SteadyNow now);

// --rate-limit-per-node's text: "5/s", "0.5/s", "5": requests per second per node.
// InvalidArgument otherwise.
StatusOr<double> ParseRatePerSecond(std::string_view text);
// The same rate as the start line says it: "5/s", or "unlimited" for 0.
std::string FormatRate(double rate);

}  // namespace hotfix::service
