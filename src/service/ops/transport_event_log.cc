#include "service/ops/transport_event_log.h"

#include <chrono>
#include <string>

namespace hotfix::service {

TransportEventLog::TransportEventLog(Metrics* metrics, Logger* log) : metrics_(metrics), log_(log) {
  for (size_t i = 0; i < kKinds; ++i) budgets_.emplace_back(1, kEventLogInterval);
}

void TransportEventLog::OnTransportEvent(TransportEvent event, std::string_view peer,
                                         std::string_view detail) {
  metrics_->RecordTransportEvent(event);
  if (event == TransportEvent::kAccepted || event == TransportEvent::kClosed) return;
  uint64_t not_logged = 0;
  if (!budgets_[static_cast<size_t>(event)].Admit(std::chrono::steady_clock::now(), &not_logged)) {
    return;
  }
  log_->Warn("connection limit", {{"event", TransportEventName(event)},
                                  {"peer", std::string(peer)},
                                  {"detail", std::string(detail)},
                                  {"not_logged_since_last", static_cast<int64_t>(not_logged)}});
}

}  // namespace hotfix::service
