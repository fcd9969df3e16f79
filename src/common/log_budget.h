// Log lines a peer can cause, kept to at most `lines` per `window` (fixed windows of a steady
// clock); the rest are counted, and the next line written says how many were not. A flood of
// refusals must not decide how much the service writes: refused calls' access-log lines (20 a
// second) and the transport's limit events (one per kind per 10 s) go through one. Thread-safe and
// lock-free; callers racing at the start of a window may each get one line more.
//
//   LogBudget budget(20, std::chrono::seconds(1));
//   uint64_t not_logged = 0;
//   if (budget.Admit(steady_clock::now(), &not_logged)) log the line, with not_logged;
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hotfix {

class LogBudget {
 public:
  LogBudget(uint32_t lines, std::chrono::nanoseconds window)
      : lines_(lines), window_ns_(window.count() > 0 ? window.count() : 1) {}

  // True when this line is written; then *not_logged is how many were not since the last one
  // that was.
  bool Admit(std::chrono::steady_clock::time_point now, uint64_t* not_logged) {
    const int64_t index = now.time_since_epoch().count() / window_ns_;
    int64_t seen = window_.load(std::memory_order_relaxed);
    // The first caller in a new window opens it.
    if (seen != index && window_.compare_exchange_strong(seen, index)) {
      in_window_.store(0, std::memory_order_relaxed);
    }
    if (in_window_.fetch_add(1, std::memory_order_relaxed) >= lines_) {
      not_logged_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    *not_logged = not_logged_.exchange(0, std::memory_order_relaxed);
    return true;
  }

 private:
  static_assert(std::is_same_v<std::chrono::steady_clock::duration, std::chrono::nanoseconds>);
  const uint32_t lines_;
  const int64_t window_ns_;
  std::atomic<int64_t> window_{-1};
  std::atomic<uint32_t> in_window_{0};
  std::atomic<uint64_t> not_logged_{0};
};

}  // namespace hotfix
