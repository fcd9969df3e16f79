#include "service/recent_reports.h"

namespace hotfix::service {

void RecentReports::ForgetExpired(Clock::time_point now) {
  while (!order_.empty() && (now - order_.front().seen >= window_ || order_.size() > max_keys_)) {
    keys_.erase(order_.front().key);
    order_.pop_front();
  }
}

bool RecentReports::FirstSeen(std::string_view key, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  ForgetExpired(now);
  if (max_keys_ == 0) return true;
  std::string k(key);
  if (keys_.count(k) != 0) return false;
  if (order_.size() == max_keys_) {
    keys_.erase(order_.front().key);
    order_.pop_front();
  }
  keys_.insert(k);
  order_.push_back({std::move(k), now});
  return true;
}

size_t RecentReports::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return order_.size();
}

}  // namespace hotfix::service
