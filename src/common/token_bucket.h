// A token bucket: at most `burst` tokens, `rate` more each second; an event it admits takes
// one. The rate and burst are the owner's and passed in, so a table of buckets (the per-node
// rate limit, service/identity/rate_limiter.cc) keeps only what changes. Not thread-safe: the
// owner serialises (a connection's loop for its control frames and resets,
// service/transport/h2_session.cc; the rate limiter's mutex).
#pragma once

#include <algorithm>
#include <chrono>

namespace hotfix {

struct TokenBucket {
  using TimePoint = std::chrono::steady_clock::time_point;

  double tokens = 0;
  TimePoint refilled;  // when `tokens` was last brought up to date

  // Takes a token if one has accrued by `now`. A clock that steps back refills nothing.
  bool Take(TimePoint now, double burst, double rate) {
    Refill(now, burst, rate);
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
  // Tokens earned otherwise than by time (a request's share of control frames), up to burst.
  void Add(double n, double burst) { tokens = std::min(burst, tokens + n); }
  void Refill(TimePoint now, double burst, double rate) {
    if (now <= refilled) return;
    tokens = std::min(burst, tokens + std::chrono::duration<double>(now - refilled).count() * rate);
    refilled = now;
  }
};

}  // namespace hotfix
