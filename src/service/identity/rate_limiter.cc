#include "service/identity/rate_limiter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <list>
#include <mutex>
#include <unordered_map>

#include "common/token_bucket.h"

namespace hotfix::service {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using Seconds = std::chrono::duration<double>;

class UnlimitedLimiter : public RateLimiter {
 public:
  bool Allow(std::string_view) override { return true; }
};

// Buckets in a list ordered by last use (front: most recent), indexed by key. Because every
// bucket refills at the same rate, the least recently used ones are also the fullest: idle
// buckets gather at the back, where each call trims them.
class TokenBucketLimiter : public RateLimiter {
 public:
  TokenBucketLimiter(double rate, size_t max_keys, SteadyNow now)
      : rate_(rate),
        burst_(std::max(1.0, rate)),
        refill_time_(burst_ / rate),
        max_keys_(std::max<size_t>(1, max_keys)),
        now_(std::move(now)) {}

  bool Allow(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mu_);
    const SteadyTime now = now_();
    ForgetIdle(now);
    return Touch(key, now).tokens.Take(now, burst_, rate_);
  }

  size_t tracked_keys() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.size();
  }

 private:
  struct Bucket {
    std::string key;  // index_ holds views of this string: list nodes never move
    TokenBucket tokens;
  };
  using List = std::list<Bucket>;

  // A bucket that has refilled to the burst is the same as no bucket.
  void ForgetIdle(SteadyTime now) {
    while (!lru_.empty() && Seconds(now - lru_.back().tokens.refilled) >= refill_time_) Forget();
  }

  void Forget() {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }

  // The bucket for key, moved to the front; a new one starts full.
  Bucket& Touch(std::string_view key, SteadyTime now) {
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return lru_.front();
    }
    if (index_.size() >= max_keys_) Forget();
    lru_.push_front(Bucket{std::string(key), TokenBucket{burst_, now}});
    index_.emplace(lru_.front().key, lru_.begin());
    return lru_.front();
  }

  const double rate_;
  const double burst_;
  const Seconds refill_time_;  // from empty to full
  const size_t max_keys_;
  const SteadyNow now_;
  mutable std::mutex mu_;
  List lru_;
  std::unordered_map<std::string_view, List::iterator> index_;
};

}  // namespace

std::unique_ptr<RateLimiter> NewTokenBucketLimiterWithClock(double rate_per_second,
                                                            size_t max_tracked_keys,
                                                            SteadyNow now) {
  if (!(rate_per_second > 0) || !std::isfinite(rate_per_second)) {
    return std::make_unique<UnlimitedLimiter>();
  }
  if (!now) now = [] { return std::chrono::steady_clock::now(); };
  return std::make_unique<TokenBucketLimiter>(rate_per_second, max_tracked_keys, std::move(now));
}

std::unique_ptr<RateLimiter> NewTokenBucketLimiter(double rate_per_second,
                                                   size_t max_tracked_keys) {
  return NewTokenBucketLimiterWithClock(rate_per_second, max_tracked_keys, nullptr);
}

StatusOr<double> ParseRatePerSecond(std::string_view text) {
  std::string_view number = text;
  if (number.ends_with("/s")) number.remove_suffix(2);
  double rate = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), rate);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size() || rate < 0 ||
      !(rate < 1e9)) {
    return Status::InvalidArgument("--rate-limit-per-node \"" + std::string(text) +
                                   "\": want N/s with N >= 0, e.g. 5/s or 0.5/s");
  }
  return rate;
}

std::string FormatRate(double rate) {
  if (rate <= 0) return "unlimited";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g/s", rate);
  return buf;
}

}  // namespace hotfix::service
