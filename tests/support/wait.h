// Waiting in tests for what must happen (a process to serve, a reload to land, a line to be
// logged): one generous bound, so that a slow or loaded machine (two cores, ASan, a parallel
// build beside it) passes and a broken one still fails in bounded time, and one poll loop.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace hotfix::testsupport {

inline constexpr std::chrono::seconds kGenerous{15};

// Polls `done` every 20 ms until it holds or `timeout` has passed; whether it held.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds timeout = kGenerous) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace hotfix::testsupport
