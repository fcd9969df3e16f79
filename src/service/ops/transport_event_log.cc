#include "service/ops/transport_event_log.h"

#include <chrono>
#include <string>

namespace hotfix::service {

void TransportEventLog::OnTransportEvent(TransportEvent event, std::string_view peer,
                                         std::string_view detail) {
  metrics_->RecordTransportEvent(event);
  if (event == TransportEvent::kAccepted || event == TransportEvent::kClosed) return;
  auto index = static_cast<size_t>(event);
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  int64_t last = last_logged_[index].load(std::memory_order_relaxed);
  if (last != 0 && now - last < kEventLogIntervalSeconds) {
    suppressed_[index].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!last_logged_[index].compare_exchange_strong(last, now)) {
    suppressed_[index].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t not_logged = suppressed_[index].exchange(0);
  log_->Warn("connection limit", {{"event", TransportEventName(event)},
                                  {"peer", std::string(peer)},
                                  {"detail", std::string(detail)},
                                  {"not_logged_since_last", static_cast<int64_t>(not_logged)}});
}

}  // namespace hotfix::service
