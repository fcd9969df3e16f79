// Transport events (transport/transport_events.h) into the metrics, and into the log at most
// once per kind per kEventLogInterval (common/log_budget.h: a flood of refused connections must
// not become a flood of log lines), with how many were not logged since. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string_view>

#include "common/log.h"
#include "common/log_budget.h"
#include "service/ops/metrics.h"
#include "service/transport/transport_events.h"

namespace hotfix::service {

class TransportEventLog final : public TransportEventSink {
 public:
  static constexpr std::chrono::seconds kEventLogInterval{10};

  TransportEventLog(Metrics* metrics, Logger* log);
  void OnTransportEvent(TransportEvent event, std::string_view peer,
                        std::string_view detail) override;

 private:
  static constexpr size_t kKinds = static_cast<size_t>(TransportEvent::kCount);
  Metrics* metrics_;
  Logger* log_;
  std::deque<LogBudget> budgets_;  // one per kind (a deque: LogBudget does not move)
};

}  // namespace hotfix::service
