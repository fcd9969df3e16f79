// Deadline: one absolute point in time that bounds a whole operation. Passed down, never
// re-derived, so that name resolution, connect, TLS and the call share one budget.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace hotfix {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline After(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  static Deadline Infinite() { return Deadline(Clock::time_point::max()); }

  Clock::time_point when() const { return when_; }
  bool infinite() const { return when_ == Clock::time_point::max(); }
  bool expired() const { return !infinite() && Clock::now() >= when_; }
  // Never negative.
  std::chrono::milliseconds remaining() const {
    if (infinite()) return std::chrono::milliseconds::max();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when_ - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
  }
  // For poll(2): -1 when infinite, rounded up so that we never spin on a 0 ms timeout.
  int PollTimeoutMs() const {
    if (infinite()) return -1;
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(when_ - Clock::now());
    if (left.count() <= 0) return 0;
    int64_t ms = (left.count() + 999) / 1000;
    return static_cast<int>(std::min<int64_t>(ms, 24 * 3600 * 1000));
  }
  Deadline Earlier(Deadline other) const { return Deadline(std::min(when_, other.when_)); }

 private:
  explicit Deadline(Clock::time_point t) : when_(t) {}
  Clock::time_point when_;
};

}  // namespace hotfix
