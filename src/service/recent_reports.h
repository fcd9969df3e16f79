// Repeats of a node's report (ReportHotfixOutcome) that one replica drops: the same
// (vmId, version, outcome) seen within a window is counted once. A node reports each result
// once (download-hotfix's marker), so a repeat is a retry whose answer was lost, or a replay.
// Bounded: the oldest key is forgotten first, so memory does not grow with the fleet.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace hotfix::service {

class RecentReports {
 public:
  using Clock = std::chrono::steady_clock;

  RecentReports(size_t max_keys, Clock::duration window) : max_keys_(max_keys), window_(window) {}

  // True the first time `key` is seen within the window (and remembers it); false for a
  // repeat. Thread-safe; O(1) amortised under one mutex.
  bool FirstSeen(std::string_view key, Clock::time_point now = Clock::now());

  size_t size() const;

 private:
  struct Entry {
    std::string key;
    Clock::time_point seen;
  };
  void ForgetExpired(Clock::time_point now);

  const size_t max_keys_;
  const Clock::duration window_;
  mutable std::mutex mu_;
  std::deque<Entry> order_;               // oldest first
  std::unordered_set<std::string> keys_;  // those in order_
};

}  // namespace hotfix::service
