// What a test server saw, in arrival order: its threads add, the test thread reads and waits.
// The one shape behind the recording servers (HelloTap's connections, ImdsStandin's and
// RawH2Server's requests, TlsPeer's handshakes).
//
//   Recorder<Request> requests_;
//   requests_.Add(std::move(request));           // on the server's thread
//   ASSERT_TRUE(requests_.WaitFor(2, kGenerous));  // on the test's
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace hotfix::testsupport {

template <typename T>
class Recorder {
 public:
  void Add(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    added_.notify_all();
  }
  std::vector<T> All() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  // True once at least n were added; false if the timeout passed first.
  bool WaitFor(size_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return added_.wait_for(lock, timeout, [&] { return items_.size() >= n; });
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    items_.clear();
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable added_;
  std::vector<T> items_;
};

}  // namespace hotfix::testsupport
